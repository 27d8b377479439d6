"""backfill.diff against a DuckDB SQL oracle, datacompy for tolerances, zoneinfo for partitions."""

from __future__ import annotations

import datetime as dt
import importlib
import math
import zoneinfo
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backfill
from diff_oracles import duckdb_diff, same_float, table_pairs

UTC = dt.timezone.utc
SUMMARY_FIELDS = [
    "matched",
    "changed",
    "added",
    "removed",
    "duplicate_keys",
    "duplicate_rows_old",
    "duplicate_rows_new",
    "null_keys_old",
    "null_keys_new",
]


def _modulo(a: Any, n: int) -> Any:
    """a mod n for non-negative integers; pc.modulo is new in pyarrow 26, which has no Python
    3.10 wheels (the cp310 wheel's tests run on pyarrow 25)."""
    return pc.subtract(a, pc.multiply(pc.divide(a, n), n))


def check_against_oracle(
    old: pa.Table, new: pa.Table, keys: list[str], cols: list[str], threads: int = 0
) -> backfill.DiffResult:
    r = backfill.diff(old, new, keys, on_duplicate="report", threads=threads)
    want = duckdb_diff(old, new, keys, cols)
    got = r.summary.to_dict()
    for f in SUMMARY_FIELDS:
        assert got[f] == want[f], (f, got, want)
    assert r.summary.unchanged == want["matched"] - want["changed"]
    assert r.summary.rows_old == old.num_rows and r.summary.rows_new == new.num_rows
    by_col = {row["column"]: row for row in r.columns.to_pylist()}
    assert sorted(by_col) == sorted(cols)
    for c in cols:
        assert by_col[c]["changed"] == want["changed_" + c], c
        assert by_col[c]["null_to_value"] == want["n2v_" + c], c
        assert by_col[c]["value_to_null"] == want["v2n_" + c], c
    assert r.identical == (want["changed"] == 0 and want["matched"] == old.num_rows == new.num_rows)
    return r


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_pairs())
def test_matches_duckdb_oracle(pair: tuple[pa.Table, pa.Table, list[str], list[str]]) -> None:
    check_against_oracle(*pair)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_pairs(dups=False), st.integers(1, 4), st.sampled_from([1, 2]))
def test_rechunking_and_threads_do_not_matter(
    pair: tuple[pa.Table, pa.Table, list[str], list[str]], chunk: int, threads: int
) -> None:
    old, new, keys, _cols = pair
    whole = backfill.diff(old, new, keys, threads=1)
    old_c = pa.Table.from_batches(old.to_batches(max_chunksize=chunk), old.schema)
    new_c = pa.Table.from_batches(new.to_batches(max_chunksize=chunk), new.schema)
    parts = backfill.diff(old_c, new_c, keys, threads=threads)
    assert parts.summary == whole.summary
    assert parts.changed_sample.to_pylist() == whole.changed_sample.to_pylist()
    for ra, rb in zip(parts.columns.to_pylist(), whole.columns.to_pylist(), strict=True):
        scale = _l1(old, ra["column"]) + _l1(new, ra["column"])
        for field, x in ra.items():
            y = rb[field]
            if not isinstance(x, float) or not isinstance(y, float):
                assert x == y, (ra["column"], field)
            elif field == "pct_delta":
                # A ratio over a sum that cancels to ~0 is as order-dependent as that sum.
                if abs(rb["sum_old"]) > 1e-9 * scale:
                    assert same_float(x, y) or abs(x - y) <= 1e-6 * max(1.0, abs(y)), field
            else:
                # Float sums are added in an order that depends on chunks and threads; they
                # agree to within rounding of the column's total magnitude.
                assert same_float(x, y) or abs(x - y) <= 1e-12 * scale, (ra["column"], field)


def _l1(table: pa.Table, column: str) -> float:
    if column not in table.column_names:
        return 0.0
    t = table[column].type
    if pa.types.is_dictionary(t) or not (
        pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_decimal(t)
    ):
        return 0.0
    total = pc.sum(pc.abs(pc.cast(table[column], pa.float64(), safe=False))).as_py()
    return float(total) if total is not None and math.isfinite(total) else math.inf


def test_large_random_table_with_both_cores() -> None:
    n = 200_000
    k = pa.array(range(n), pa.int64())
    old = pa.table({"id": k, "v": pc.multiply(k, 0.5), "s": pc.cast(_modulo(k, 97), pa.string())})
    v_new = pc.if_else(pc.equal(_modulo(k, 100), 0), pc.add(old["v"], 1.0), old["v"])
    new = pa.table({"id": k, "v": v_new, "s": old["s"]}).slice(10)
    new = pa.concat_tables(
        [new, pa.table({"id": pa.array([n + 1], pa.int64()), "v": [1.0], "s": ["x"]})]
    )
    r = check_against_oracle(old, new, ["id"], ["v", "s"], threads=2)
    assert r.summary.changed == 2000 - 1  # id 0 is among the 10 removed rows
    assert r.summary.removed == 10 and r.summary.added == 1
    v = r.columns.to_pylist()[0]
    assert v["column"] == "v" and r.measures == ["v"]
    assert v["sum_old"] == pytest.approx(pc.sum(old["v"]).as_py())
    assert v["sum_new"] == pytest.approx(pc.sum(new["v"]).as_py())
    assert v["max_abs_diff"] == 1.0


def test_large_shuffled_composite_key_with_nulls_and_duplicates() -> None:
    # Composite keys are matched on their hash and the claims checked afterwards in new-row
    # order through each new row's bucket position: shuffled, chunked rows on both cores, with
    # null keys and duplicated keys, against the DuckDB oracle and the same rows in key order.
    n = 50_000
    rng = np.random.default_rng(3)
    ids = rng.permutation(n)
    k = pa.array(ids, pa.int64())
    day = pa.array(np.where(ids % 1000 == 0, None, ids % 7), pa.int32())
    old = pa.table(
        {"id": k, "d": day, "v": pc.multiply(k, 0.5), "s": pc.cast(_modulo(k, 97), pa.string())}
    )
    perm = rng.permutation(n)
    new = old.take(pa.array(perm[: n - 500]))  # 500 rows removed
    changed = pc.equal(_modulo(new["id"], 50), 1)
    new = new.set_column(2, "v", pc.if_else(changed, pc.add(new["v"], 1.0), new["v"]))
    dup = old.take(pa.array(perm[:20]))  # 20 keys duplicated in new
    new = pa.concat_tables([new, dup])
    new = pa.Table.from_batches(
        new.take(pa.array(rng.permutation(new.num_rows))).to_batches(max_chunksize=4_000)
    )
    r = check_against_oracle(old, new, ["id", "d"], ["v", "s"], threads=2)
    assert r.summary.duplicate_keys == 20 - int(pc.sum(pc.is_null(dup["d"])).as_py())
    ordered = backfill.diff(
        old.sort_by("id"), new.sort_by("id"), ["id", "d"], on_duplicate="report", threads=1
    )
    assert ordered.summary == r.summary
    assert ordered.columns.column("changed") == r.columns.column("changed")


def test_composite_keys_compare_column_wise() -> None:
    old = pa.table({"a": ["1", "11"], "b": ["11", "1"], "v": [1, 2]})
    new = pa.table({"a": ["11", "1"], "b": ["1", "11"], "v": [2, 1]})
    r = backfill.diff(old, new, ["a", "b"])
    assert r.identical and r.summary.matched == 2
    swapped = pa.table({"a": ["11", "1"], "b": ["1", "11"], "v": [1, 2]})
    assert backfill.diff(old, swapped, ["a", "b"]).summary.changed == 2


def test_duplicate_keys_error_names_the_key_and_count() -> None:
    old = pa.table({"id": [1, 2, 2, 2, 3], "v": [0, 0, 0, 0, 0]})
    new = pa.table({"id": [1, 2, 3], "v": [0, 0, 1]})
    with pytest.raises(
        backfill.InvalidInputError, match=r"duplicate key in old: \(id=2\) appears 3 times"
    ):
        backfill.diff(old, new, "id")
    r = backfill.diff(old, new, "id", on_duplicate="report")
    s = r.summary
    assert (s.duplicate_keys, s.duplicate_rows_old, s.duplicate_rows_new) == (1, 3, 1)
    assert (s.matched, s.changed, s.added, s.removed) == (2, 1, 0, 0)
    assert not r.identical


def test_key_duplicated_only_in_new_is_excluded_on_both_sides() -> None:
    old = pa.table({"id": [0, 1], "v": [1, 1]})
    new = pa.table({"id": [0, 0, 0, 1, 2, 2], "v": [1, 1, 2, 1, 1, 1]})
    s = backfill.diff(old, new, "id", on_duplicate="report").summary
    assert (s.matched, s.added, s.removed, s.duplicate_keys) == (1, 0, 0, 2)
    assert (s.duplicate_rows_old, s.duplicate_rows_new) == (1, 5)
    with pytest.raises(backfill.InvalidInputError, match=r"in new: \(id=0\) appears 3 times"):
        backfill.diff(old, new, "id")


def test_null_keys_are_counted_not_matched() -> None:
    old = pa.table({"id": [1, None, None], "v": [1, 2, 3]})
    new = pa.table({"id": [1, None], "v": [1, 2]})
    s = backfill.diff(old, new, "id").summary
    assert (s.null_keys_old, s.null_keys_new, s.matched, s.added, s.removed) == (2, 1, 1, 0, 0)
    assert not s.identical


def test_nulls_nan_and_signed_zero_are_equal_to_themselves() -> None:
    old = pa.table({"id": [1, 2, 3, 4], "f": [None, float("nan"), -0.0, 1.0]})
    new = pa.table({"id": [1, 2, 3, 4], "f": [None, float("nan"), 0.0, float("nan")]})
    r = backfill.diff(old, new, "id")
    assert r.summary.changed == 1
    assert r.changed_sample.to_pylist() == [{"id": 4, "column": "f", "old": "1.0", "new": "nan"}]


def test_every_input_kind_gives_the_same_result() -> None:
    polars = importlib.import_module("polars")
    importlib.import_module("pandas")  # to_pandas() below: fail here, by name, without it
    duckdb = importlib.import_module("duckdb")
    old = pa.table({"id": [1, 2, 3, 4], "v": [1.0, 2.0, None, 4.0], "s": ["a", "b", "c", None]})
    new = pa.table({"id": [2, 3, 4, 5], "v": [2.0, 3.0, 4.0, 5.0], "s": ["b", "c", "x", "y"]})

    class StreamOnly:
        def __init__(self, t: pa.Table) -> None:
            self.t = t

        def __arrow_c_stream__(self, requested_schema: object = None) -> object:
            return self.t.__arrow_c_stream__(requested_schema)

    con = duckdb.connect()
    con.register("o", old)
    con.register("n", new)
    variants: list[tuple[Any, Any]] = [
        (old, new),
        (
            pa.RecordBatchReader.from_batches(old.schema, old.to_batches(max_chunksize=1)),
            pa.RecordBatchReader.from_batches(new.schema, new.to_batches(max_chunksize=3)),
        ),
        (polars.from_arrow(old), polars.from_arrow(new)),
        (old.to_pandas(), new.to_pandas()),
        (con.sql("select * from o"), con.sql("select * from n")),
        (StreamOnly(old), StreamOnly(new)),
        (old.to_batches()[0], new.to_batches()[0]),
    ]
    results = [backfill.diff(a, b, "id") for a, b in variants]
    first = results[0]
    assert first.summary.changed == 2 and first.summary.added == 1 and first.summary.removed == 1
    for r in results[1:]:
        assert r.summary == first.summary
        assert r.columns.to_pylist() == first.columns.to_pylist()
        assert r.changed_sample.to_pylist() == first.changed_sample.to_pylist()
        assert r.added_sample.to_pylist() == first.added_sample.to_pylist()


def test_every_supported_type_detects_a_single_change() -> None:
    from diff_oracles import VALUE_TYPES

    base: dict[str, list[Any]] = {"id": [1, 2, 3]}
    changed_values = {
        "i64": [1, 2, 3],
        "i32": [1, 2, 3],
        "u8": [1, 2, 3],
        "f64": [0.5, 1.5, 2.5],
        "f32": [0.5, 1.5, 2.5],
        "s": ["a", "b", "c"],
        "ls": ["a", "b", "c"],
        "bin": [b"a", b"b", b"c"],
        "b": [True, False, True],
        "d": [dt.date(2020, 1, 1), dt.date(2020, 1, 2), dt.date(2020, 1, 3)],
        "d64": [dt.date(2020, 1, 1), dt.date(2020, 1, 2), dt.date(2020, 1, 3)],
        "lbin": [b"a", b"b", b"c"],
        "ts": [1, 2, 3],
        "ts_ns": [1, 2, 3],
        "dur": [1, 2, 3],
        "t": [1, 2, 3],
    }
    import decimal

    changed_values["dec"] = [
        decimal.Decimal("1.00"),
        decimal.Decimal("2.00"),
        decimal.Decimal("3.00"),
    ]
    for name, (typ, _) in VALUE_TYPES.items():
        vals = changed_values[name]
        old = pa.table({**base, name: pa.array(vals, typ)})
        new_vals = list(vals)
        new_vals[1] = vals[2]
        new = pa.table({**base, name: pa.array(new_vals, typ)})
        r = backfill.diff(old, new, "id")
        assert (r.summary.changed, r.changed_columns()) == (1, {name: 1}), name
        assert backfill.diff(old, old, "id").identical, name
    # dictionaries compare by value, string views like strings, nested by logical value
    d_old = pa.table({"id": [1, 2], "c": pa.array(["x", "y"]).dictionary_encode()})
    d_new = pa.table({"id": [1, 2], "c": pa.array(["y", "y"], pa.string_view())})
    r = backfill.diff(d_old, d_new, "id")
    assert r.summary.changed == 1 and r.schema.num_rows == 0
    l_old = pa.table({"id": [1, 2], "l": pa.array([[1, 2], [3]], pa.list_(pa.int32()))})
    l_new = pa.table({"id": [1, 2], "l": pa.array([[1, 2], [3, None]], pa.large_list(pa.int64()))})
    r = backfill.diff(l_old, l_new, "id")
    assert r.changed_columns() == {"l": 1}
    assert r.changed_sample.to_pylist()[0]["new"] == "[3, null]"
    assert backfill.diff(
        pa.table({"id": [1], "n": pa.nulls(1)}), pa.table({"id": [1], "n": pa.nulls(1)}), "id"
    ).identical


def test_retyped_columns_compare_by_value_and_are_reported() -> None:
    old = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "n": pa.array([1, 2, 3], pa.int32()),
            "t": pa.array([0, 1_000, 2_000], pa.timestamp("ms", "UTC")),
            "x": ["1", "2", "3"],
        }
    )
    new = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "n": pa.array([1, 2, 4], pa.int64()),
            "t": pa.array([0, 1_000_000, 2_000_001], pa.timestamp("us", "Europe/Berlin")),
            "x": pa.array([1, 2, 3], pa.int64()),
        }
    )
    r = backfill.diff(old, new, "id")
    schema = {row["column"]: row for row in r.schema.to_pylist()}
    assert schema["n"]["old_type"] == "int32" and schema["n"]["new_type"] == "int64"
    assert schema["x"]["compared"] is False and schema["n"]["compared"] is True
    assert r.changed_columns() == {"n": 1, "t": 1}
    assert "x" not in r.columns["column"]
    assert r.summary.schema_changed and not r.identical


def test_tolerance_semantics_match_datacompy() -> None:
    datacompy = importlib.import_module("datacompy")
    importlib.import_module("pandas")  # to_pandas() below: fail here, by name, without it
    import random

    rng = random.Random(7)
    n = 400
    old = pa.table(
        {"id": list(range(n)), "x": [rng.choice([0.0, 1.0, 100.0, -50.0, None]) for _ in range(n)]}
    )
    x_new = [
        None if v is None else v + rng.choice([0.0, 0.004, 0.006, 0.5, -0.009, 1.2])
        for v in old["x"].to_pylist()
    ]
    new = pa.table({"id": list(range(n)), "x": x_new})
    for abs_tol, rel_tol in [(0.005, 0.0), (0.0, 0.01), (0.001, 0.005), (0.0, 0.0)]:
        ours = backfill.diff(old, new, "id", tolerance={"x": {"abs": abs_tol, "rel": rel_tol}})
        # datacompy's np.isclose is relative to its second frame: give it old second.
        cmp = datacompy.PandasCompare(
            new.to_pandas(), old.to_pandas(), join_columns="id", abs_tol=abs_tol, rel_tol=rel_tol
        )
        stats = {s["column"]: s["unequal_cnt"] for s in cmp.column_stats}
        assert ours.changed_columns().get("x", 0) == stats["x"], (abs_tol, rel_tol)
    r = backfill.diff(old, new, "id", tolerance={"__default__": 0.01})
    assert r.columns.to_pylist()[0]["compare"] == "tolerance"
    assert r.columns.to_pylist()[0]["max_abs_diff"] == pytest.approx(1.2)


@pytest.mark.parametrize("tz", ["Europe/Berlin", "Asia/Kathmandu", "America/Santiago"])
def test_partitions_across_dst_days_match_zoneinfo(tz: str) -> None:
    zone = zoneinfo.ZoneInfo(tz)
    start = dt.datetime(2026, 3, 28, tzinfo=UTC)
    step = dt.timedelta(minutes=15 if tz == "Asia/Kathmandu" else 60)  # +05:45 splits hours
    hours = (
        [start + step * h for h in range(24 * 3)]
        + [dt.datetime(2026, 10, 24, tzinfo=UTC) + step * h for h in range(24 * 3)]
        + [dt.datetime(2026, 4, 4, tzinfo=UTC) + step * h for h in range(24 * 3)]
    )
    n = len(hours)
    old = pa.table(
        {
            "id": list(range(n)),
            "at": pa.array(hours, pa.timestamp("us", "UTC")),
            "amount": [float(i % 7) for i in range(n)],
        }
    )
    amounts = [a * 1.1 if i % 5 == 0 else a for i, a in enumerate(old["amount"].to_pylist())]
    ats = list(hours)
    ats[3] = ats[3] + dt.timedelta(days=1)  # moves partition: counts as changed in both
    new = pa.table(
        {"id": list(range(n)), "at": pa.array(ats, pa.timestamp("us", "UTC")), "amount": amounts}
    ).slice(0, n - 2)
    r = backfill.diff(old, new, "id", partition_by="at", tz=tz)

    def label(t: dt.datetime) -> str:
        return t.astimezone(zone).date().isoformat()

    want: dict[str, dict[str, float]] = {}

    def bump(lbl: str, field: str, by: float = 1) -> None:
        want.setdefault(
            lbl,
            {
                "rows_old": 0,
                "rows_new": 0,
                "added": 0,
                "removed": 0,
                "changed": 0,
                "amount_old": 0.0,
                "amount_new": 0.0,
            },
        )
        want[lbl][field] += by

    for i in range(n):
        bump(label(hours[i]), "rows_old")
        bump(label(hours[i]), "amount_old", old["amount"][i].as_py())
    for i in range(n - 2):
        bump(label(ats[i]), "rows_new")
        bump(label(ats[i]), "amount_new", amounts[i])
        if amounts[i] != old["amount"][i].as_py() or ats[i] != hours[i]:
            bump(label(hours[i]), "changed")
            if label(ats[i]) != label(hours[i]):
                bump(label(ats[i]), "changed")
    for i in (n - 2, n - 1):
        bump(label(hours[i]), "removed")
    got = {p["partition"]: p for p in r.partitions.to_pylist()}
    assert list(got) == sorted(want)
    for lbl, w in want.items():
        for field, v in w.items():
            assert got[lbl][field] == pytest.approx(v), (lbl, field)
    hours_long = {
        p["partition"]: (p["end"] - p["start"]).total_seconds() / 3600
        for p in r.partitions.to_pylist()
    }
    if tz == "Europe/Berlin":
        assert hours_long["2026-03-29"] == 23 and hours_long["2026-10-25"] == 25
    amount = next(c for c in r.columns.to_pylist() if c["column"] == "amount")
    assert amount["sum_old"] == pytest.approx(sum(old["amount"].to_pylist()))
    assert amount["sum_new"] == pytest.approx(sum(amounts[: n - 2]))
    assert amount["pct_delta"] == pytest.approx(
        (amount["sum_new"] - amount["sum_old"]) / amount["sum_old"] * 100
    )


def test_date_partitions_and_null_partition_values() -> None:
    old = pa.table(
        {"id": [1, 2, 3], "day": [dt.date(2026, 8, 1), dt.date(2026, 8, 2), None], "v": [1, 2, 3]}
    )
    new = pa.table(
        {"id": [1, 2, 3], "day": [dt.date(2026, 8, 1), dt.date(2026, 8, 2), None], "v": [1, 5, 3]}
    )
    r = backfill.diff(old, new, "id", partition_by="day", grain="month")
    parts = r.partitions.to_pylist()
    assert [p["partition"] for p in parts] == ["2026-08", None]
    assert parts[0]["changed"] == 1 and parts[0]["v_delta"] == 3 and parts[1]["rows_old"] == 1


def test_measure_names_never_collide_in_the_partitions_table() -> None:
    # The shop's order items have both `discount` and `discount_pct`: their per-partition columns
    # used to collide (discount_pct_delta twice) and the audit of clean_order_items failed.
    day = [dt.date(2026, 8, 1), dt.date(2026, 8, 2)]
    old = pa.table(
        {"id": [1, 2], "day": day, "discount": [1.0, 2.0], "discount_pct": [10, 20], "rows": [1, 1]}
    )
    new = pa.table(
        {"id": [1, 2], "day": day, "discount": [1.0, 4.0], "discount_pct": [10, 30], "rows": [1, 1]}
    )
    r = backfill.diff(old, new, "id", partition_by="day")
    p = r.partitions.to_pylist()[1]
    assert (p["discount_delta"], p["discount_delta_pct"]) == (2.0, 100.0)
    assert (p["discount_pct_delta"], p["discount_pct_delta_pct"]) == (10, 50.0)
    assert (p["rows_old"], p["rows_new"]) == (1, 1)  # the row counts, not a column named rows
    with pytest.raises(backfill.InvalidInputError, match="measure column 'rows' would name"):
        backfill.diff(old, new, "id", partition_by="day", measures=["rows"])


def test_empty_and_one_row_tables() -> None:
    empty = pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.float64())})
    one = pa.table({"id": [1], "v": [1.0]})
    assert backfill.diff(empty, empty, "id").identical
    r = backfill.diff(empty, one, "id")
    assert (r.summary.added, r.added_sample.to_pylist()) == (1, [{"id": 1, "v": 1.0}])
    r = backfill.diff(one, empty, "id")
    assert (r.summary.removed, r.removed_sample.num_rows) == (1, 1)
    all_changed = pa.table({"id": [1], "v": [2.0]})
    assert backfill.diff(one, all_changed, "id").summary.changed == 1


def test_samples_are_deterministic_and_bounded() -> None:
    n = 5000
    old = pa.table({"id": list(range(n)), "v": [0] * n})
    new = pa.table({"id": list(range(n - 1, -1, -1)), "v": [1] * n})
    a = backfill.diff(old, new, "id", sample=3, threads=2)
    b = backfill.diff(old, new, "id", sample=3, threads=1)
    assert a.changed_sample.to_pylist() == b.changed_sample.to_pylist()
    assert a.changed_sample["id"] == [n - 1, n - 2, n - 3]  # first changed rows in new's order
    assert backfill.diff(old, new, "id", sample=0).changed_sample.num_rows == 0


def test_measures_option_and_explicit_columns() -> None:
    old = pa.table({"id": [1, 2], "a": [1.0, 2.0], "b": [10, 20], "s": ["x", "y"]})
    new = pa.table({"id": [1, 2], "a": [1.0, 3.0], "b": [10, 25], "s": ["x", "z"]})
    r = backfill.diff(old, new, "id", columns=["a", "s"], measures=["b"])
    cols = {c["column"]: c for c in r.columns.to_pylist()}
    assert set(cols) == {"a", "s", "b"}
    assert (
        cols["a"]["sum_old"] is None and cols["b"]["sum_new"] == 35 and cols["b"]["changed"] is None
    )
    assert backfill.diff(old, new, "id", exclude=["s"]).changed_columns() == {"a": 1, "b": 1}


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (
            {"key": "nope"},
            backfill.NotFoundError,
            r"key column 'nope' is not in old \(its columns: id, v, s\)",
        ),
        ({"key": "id", "columns": ["zz"]}, backfill.NotFoundError, "compared column 'zz'"),
        ({"key": "id", "exclude": ["zz"]}, backfill.NotFoundError, "exclude names column 'zz'"),
        (
            {"key": "id", "tolerance": {"zz": 1}},
            backfill.NotFoundError,
            "tolerance names column 'zz'",
        ),
        (
            {"key": "id", "tolerance": {"s": 1}},
            backfill.InvalidInputError,
            "column 's' of type string",
        ),
        ({"key": "id", "tolerance": {"v": {"abs": -1}}}, backfill.InvalidInputError, "abs=-1"),
        ({"key": "id", "tolerance": {"v": {"ab": 1}}}, backfill.InvalidInputError, "unknown keys"),
        (
            {"key": "id", "measures": ["s"]},
            backfill.InvalidInputError,
            "measure column 's' has type string",
        ),
        (
            {"key": "id", "partition_by": "v"},
            backfill.InvalidInputError,
            "partition_by column 'v' has type float64",
        ),
        ({"key": "id", "grain": "fortnight"}, backfill.InvalidInputError, "fortnight"),
        ({"key": "id", "tz": "Mars/Base"}, backfill.InvalidInputError, "Mars/Base"),
        (
            {"key": "id", "on_duplicate": "ignore"},
            backfill.InvalidInputError,
            "on_duplicate='ignore'",
        ),
        ({"key": []}, backfill.InvalidInputError, "at least one column"),
    ],
)
def test_bad_options_name_the_problem(
    kwargs: dict[str, Any], error: type[Exception], pattern: str
) -> None:
    t = pa.table({"id": [1], "v": [1.0], "s": ["a"]})
    with pytest.raises(error, match=pattern):
        backfill.diff(t, t, **kwargs)


def test_key_type_mismatch_names_both_types() -> None:
    a = pa.table({"id": [1], "v": [1]})
    b = pa.table({"id": ["1"], "v": [1]})
    with pytest.raises(
        backfill.InvalidInputError, match="key column 'id' has type int64 in old and string in new"
    ):
        backfill.diff(a, b, "id")
    with pytest.raises(backfill.InvalidInputError, match="Arrow-compatible"):
        backfill.diff({"id": [1]}, a, "id")
    nested = pa.table({"id": pa.array([[1]]), "v": [1]})
    with pytest.raises(backfill.InvalidInputError, match="key column 'id' has type list<int64>"):
        backfill.diff(nested, nested, "id")


def test_report_text_and_html() -> None:
    old = pa.table(
        {
            "id": [1, 2, 3],
            "day": [dt.date(2026, 8, 1), dt.date(2026, 8, 2), dt.date(2026, 8, 2)],
            "revenue": [100.0, 200.0, 300.0],
        }
    )
    new = pa.table(
        {
            "id": [1, 2, 4],
            "day": [dt.date(2026, 8, 1), dt.date(2026, 8, 2), dt.date(2026, 8, 3)],
            "revenue": [100.0, 190.0, 5.0],
        }
    )
    r = backfill.diff(old, new, "id", partition_by="day")
    text = str(r)
    assert "DIFFERENT" in text and "changed 1" in text and "revenue" in text
    assert "measure revenue: 600 -> 295" in text
    assert "2026-08-02: +0 -1 ~1" in text
    assert repr(r).startswith("<DiffResult different: 1 changed, 1 added, 1 removed")
    page = r._repr_html_()
    assert page is not None and "<svg" in page and "revenue" in page and "summary" in page
    assert bool(r) is True and bool(backfill.diff(old, old, "id")) is False
    assert r.to_pandas()["column"].tolist() == ["day", "revenue"]
    assert pa.table(r).num_rows == 2


def test_plot_draws_old_and_new_per_partition() -> None:
    importlib.import_module("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    old = pa.table(
        {"id": [1, 2], "day": [dt.date(2026, 8, 1), dt.date(2026, 8, 2)], "x": [1.0, 2.0]}
    )
    new = pa.table(
        {"id": [1, 2], "day": [dt.date(2026, 8, 1), dt.date(2026, 8, 2)], "x": [1.0, 3.0]}
    )
    ax = backfill.diff(old, new, "id", partition_by="day").plot("x")
    assert [line.get_label() for line in ax.get_lines()] == ["old", "new"]
    assert list(ax.get_lines()[1].get_ydata()) == [1.0, 3.0]
    with pytest.raises(backfill.InvalidInputError, match="not a measure"):
        backfill.diff(old, new, "id", partition_by="day").plot("nope")
