"""Oracles and table generators shared by the diff and fingerprint tests."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import duckdb
import pyarrow as pa
from hypothesis import strategies as st

UTC = dt.timezone.utc


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duckdb_diff(old: pa.Table, new: pa.Table, keys: list[str], cols: list[str]) -> dict[str, Any]:
    """The diff in DuckDB SQL: null keys dropped, duplicated keys (either side) excluded, then a
    FULL OUTER JOIN on the key with IS DISTINCT FROM per column."""
    con = duckdb.connect()
    con.register("o_raw", old)
    con.register("n_raw", new)
    kq = ", ".join(q(k) for k in keys)
    nn = " and ".join(f"{q(k)} is not null" for k in keys)
    on = " and ".join(f"ou.{q(k)} = nu.{q(k)}" for k in keys)
    osel = ", ".join(f"ou.{q(c)} as {q('o_' + c)}" for c in cols)
    nsel = ", ".join(f"nu.{q(c)} as {q('n_' + c)}" for c in cols)
    both = "__o and __n"
    diffs = [f"{q('o_' + c)} is distinct from {q('n_' + c)}" for c in cols]
    per_col = ", ".join(
        f"count(*) filter (where {both} and {d}) as {q('changed_' + c)}, "
        f"count(*) filter (where {both} and {q('o_' + c)} is null and {q('n_' + c)} is not null) "
        f"as {q('n2v_' + c)}, "
        f"count(*) filter (where {both} and {q('o_' + c)} is not null and {q('n_' + c)} is null) "
        f"as {q('v2n_' + c)}"
        for c, d in zip(cols, diffs, strict=True)
    )
    any_diff = " or ".join(diffs) if diffs else "false"
    sql = f"""
    with o as (select * from o_raw where {nn}), n as (select * from n_raw where {nn}),
    dup as (select {kq} from (
              select {kq} from o group by all having count(*) > 1
              union all select {kq} from n group by all having count(*) > 1) group by all),
    ou as (select *, true as __o from o anti join dup using ({kq})),
    nu as (select *, true as __n from n anti join dup using ({kq})),
    j as (select {osel}{", " if cols else ""}{nsel}{", " if cols else ""}
                 coalesce(ou.__o, false) as __o, coalesce(nu.__n, false) as __n
          from ou full outer join nu on {on})
    select count(*) filter (where {both}) as matched,
           count(*) filter (where {both} and ({any_diff})) as changed,
           count(*) filter (where __n and not __o) as added,
           count(*) filter (where __o and not __n) as removed
           {", " + per_col if cols else ""},
           (select count(*) from dup) as duplicate_keys,
           (select count(*) from o semi join dup using ({kq})) as duplicate_rows_old,
           (select count(*) from n semi join dup using ({kq})) as duplicate_rows_new,
           (select count(*) from o_raw where not ({nn})) as null_keys_old,
           (select count(*) from n_raw where not ({nn})) as null_keys_new
    from j
    """
    row = con.execute(sql).fetchone()
    assert row is not None
    names = [d[0] for d in con.description]
    return dict(zip(names, row, strict=True))


# ---- random tables ----

FLOATS = [0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), 1e-300, None]
STRINGS = ["", "a", "b", "a longer string, past twelve bytes", "ünïcode", None]
DATES = [dt.date(2026, 8, 1), dt.date(1969, 12, 31), dt.date(2000, 2, 29), None]
DECIMALS = [decimal.Decimal("1.00"), decimal.Decimal("-3.25"), decimal.Decimal("0.01"), None]

VALUE_TYPES: dict[str, tuple[pa.DataType, Any]] = {
    "i64": (pa.int64(), st.one_of(st.none(), st.integers(-2, 2), st.just(2**62))),
    "i32": (pa.int32(), st.one_of(st.none(), st.integers(-2, 2))),
    "u8": (pa.uint8(), st.one_of(st.none(), st.integers(0, 3))),
    "f64": (pa.float64(), st.sampled_from(FLOATS)),
    "f32": (pa.float32(), st.sampled_from(FLOATS)),
    "s": (pa.string(), st.sampled_from(STRINGS)),
    "ls": (pa.large_string(), st.sampled_from(STRINGS)),
    "bin": (pa.binary(), st.sampled_from([b"", b"\x00", b"ab", None])),
    "b": (pa.bool_(), st.sampled_from([True, False, None])),
    "d": (pa.date32(), st.sampled_from(DATES)),
    "d64": (pa.date64(), st.sampled_from(DATES)),
    "lbin": (pa.large_binary(), st.sampled_from([b"", b"\x00", b"ab", None])),
    "ts": (pa.timestamp("us", "UTC"), st.one_of(st.none(), st.integers(-5, 5))),
    "ts_ns": (pa.timestamp("ns"), st.one_of(st.none(), st.integers(-5, 5))),
    "dec": (pa.decimal128(10, 2), st.sampled_from(DECIMALS)),
    "dur": (pa.duration("ms"), st.one_of(st.none(), st.integers(-3, 3))),
    "t": (pa.time64("us"), st.one_of(st.none(), st.integers(0, 3))),
}


@st.composite
def table_pairs(
    draw: Any, *, composite: bool | None = None, dups: bool | None = None
) -> tuple[pa.Table, pa.Table, list[str], list[str]]:
    """Two versions of a random table: rows kept, modified, deleted and added."""
    names = draw(
        st.lists(st.sampled_from(sorted(VALUE_TYPES)), min_size=0, max_size=5, unique=True)
    )
    composite = draw(st.booleans()) if composite is None else composite
    dups = draw(st.booleans()) if dups is None else dups
    keys = ["k1", "k2"] if composite else ["k1"]
    key_values = st.one_of(st.integers(0, 12), st.none() if dups else st.integers(13, 14))
    n = draw(st.integers(0, 25))

    def row() -> dict[str, Any]:
        r: dict[str, Any] = {"k1": draw(key_values)}
        if composite:
            r["k2"] = draw(st.sampled_from(["x", "y", "", None] if dups else ["x", "y", ""]))
        for c in names:
            r[c] = draw(VALUE_TYPES[c][1])
        return r

    def unique(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return rows if dups else _first_per_key(rows, keys)

    old_rows = unique([row() for _ in range(n)])
    new_rows = _kept_or_modified(draw, old_rows, names)
    new_rows += [row() for _ in range(draw(st.integers(0, 4)))]
    new_rows = unique(draw(st.permutations(new_rows)))
    schema = pa.schema(
        [("k1", pa.int64())]
        + ([("k2", pa.string())] if composite else [])
        + [(c, VALUE_TYPES[c][0]) for c in names]
    )
    old = pa.Table.from_pylist(old_rows, schema=schema)
    new = pa.Table.from_pylist(new_rows, schema=schema)
    return old, new, keys, names


def _first_per_key(rows: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """The rows whose key was not seen in an earlier row."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for r in rows:
        k = tuple(r[c] for c in keys)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _kept_or_modified(
    draw: Any, old_rows: list[dict[str, Any]], names: list[str]
) -> list[dict[str, Any]]:
    """Each old row kept (twice as likely), modified in some value columns, or deleted."""
    new_rows = []
    for r in old_rows:
        op = draw(st.sampled_from(["keep", "keep", "modify", "delete"]))
        if op == "keep":
            new_rows.append(dict(r))
        elif op == "modify":
            m = dict(r)
            for c in names:
                if draw(st.booleans()):
                    m[c] = draw(VALUE_TYPES[c][1])
            new_rows.append(m)
    return new_rows


def same_float(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)


def assert_same_diff_tables(got: Any, want: Any, floats: tuple[str, ...] = ()) -> None:
    """``got``'s per-column and per-partition tables equal ``want``'s: the same types and the
    same values, exactly, except the columns ``floats`` (float sums: equal up to the order in
    which the rows were added) and percentages (from the same exact sums, through long double in
    C++ and 100-digit decimals in Python)."""
    import pytest

    for name in ("columns", "partitions"):
        g, w = getattr(got, name), getattr(want, name)
        # A table copied from pyarrow holds its strings as large_utf8 (ArrowTable.from_arrow).
        types = {c: t.replace("large_utf8", "utf8") for c, t in g.types.items()}
        assert types == w.types, (name, g.types, w.types)
        assert g.num_rows == w.num_rows, name
        for row_g, row_w in zip(g.to_pylist(), w.to_pylist(), strict=True):
            float_row = name == "columns" and row_w.get("sum_kind") == "float"
            for col, vw in row_w.items():
                vg = row_g[col]
                approximate = (
                    col.endswith("pct")
                    or col.endswith("pct_delta")
                    or any(col.startswith(f + "_") for f in floats)
                    or (float_row and col in ("sum_old", "sum_new", "delta"))
                    or (name == "columns" and isinstance(vw, float) and col != "max_abs_diff")
                )
                if approximate and vw is not None and vg is not None:
                    assert vg == pytest.approx(vw, rel=1e-9, abs=1e-6), (name, col, row_w)
                else:
                    assert vg == vw and type(vg) is type(vw), (name, col, vg, vw, row_w)
