"""The merge path (both sides sorted by one integer key) against the DuckDB oracle, and the
inputs that must fall back to the hash path (descending step, equal adjacent keys, null keys)."""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_diff import check_against_oracle

import backfill
from diff_oracles import duckdb_diff, table_pairs


def path(r: backfill.DiffResult) -> str:
    return "merge" if "merge" in r.timings else "hash"


def chunked(t: pa.Table, size: int) -> pa.Table:
    return pa.Table.from_batches(t.to_batches(max_chunksize=size), t.schema)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_pairs(composite=False, dups=False), st.integers(1, 5), st.sampled_from([1, 2]))
def test_sorted_tables_merge_and_match_duckdb(
    pair: tuple[pa.Table, pa.Table, list[str], list[str]], chunk: int, threads: int
) -> None:
    old, new, keys, cols = pair
    old = chunked(old.sort_by("k1"), chunk)  # sort order spans batch boundaries
    new = chunked(new.sort_by("k1"), chunk)
    r = check_against_oracle(old, new, keys, cols, threads=threads)
    assert path(r) == "merge"
    # The same rows in another order take the hash path, with the same counts and samples of
    # the same rows.
    h = backfill.diff(new.sort_by([("k1", "descending")]), old, keys, threads=threads)
    back = backfill.diff(new, old, keys, threads=threads)
    assert path(back) == "merge" and (path(h) == "hash" or new.num_rows <= 1)
    assert h.summary == back.summary
    # (measure sums are left out: their last bits depend on the order of the additions)
    fields = ["column", "changed", "null_to_value", "value_to_null", "max_abs_diff"]
    assert [[c[f] for f in fields] for c in h.columns.to_pylist()] == [
        [c[f] for f in fields] for c in back.columns.to_pylist()
    ]
    assert h.added_sample.num_rows == back.added_sample.num_rows


def _table(ids: Sequence[int | None], chunk: int = 3) -> pa.Table:
    t = pa.table({"id": pa.array(ids, pa.int64()), "v": [float(i or 0) for i in ids]})
    return chunked(t, chunk)


def test_added_and_removed_at_both_ends_across_batches() -> None:
    old = _table(list(range(10, 40)))
    new = _table(list(range(0, 5)) + list(range(12, 38)) + list(range(50, 53)), chunk=4)
    r = backfill.diff(old, new, "id")
    assert path(r) == "merge"
    assert (r.summary.added, r.summary.removed, r.summary.matched) == (8, 4, 26)
    assert r.added_sample.column("id") == [0, 1, 2, 3, 4, 50, 51, 52]
    assert r.removed_sample.column("id") == [10, 11, 38, 39]


def test_descending_step_in_the_last_batch_falls_back() -> None:
    old = _table(list(range(20)))
    new = _table([*range(18), 19, 18])
    r = backfill.diff(old, new, "id")
    assert path(r) == "hash"
    assert r.identical and r.summary.matched == 20 and r.summary.changed == 0


def test_equal_adjacent_keys_fall_back_and_are_reported() -> None:
    old = _table(list(range(20)))
    new = _table([*range(10), 9, *range(11, 20)])
    with pytest.raises(backfill.BackfillError, match=r"duplicate key in new: \(id=9\) appears 2"):
        backfill.diff(old, new, "id")
    r = backfill.diff(old, new, "id", on_duplicate="report")
    assert path(r) == "hash"
    assert (r.summary.duplicate_keys, r.summary.duplicate_rows_new, r.summary.removed) == (1, 2, 1)


def test_null_key_falls_back() -> None:
    r = backfill.diff(_table([1, 2, 3]), _table([1, None, 3]), "id")
    assert path(r) == "hash"
    assert (r.summary.null_keys_new, r.summary.removed) == (1, 1)


def _long_pair(seed: int, n: int) -> tuple[pa.Table, pa.Table, list[str]]:
    """Sorted tables with runs of thousands of matched keys (the merge compares a run's column
    buffers block by block): rare changes at block edges and elsewhere, nulls on some
    columns, -0.0 against 0.0 and NaN against another NaN (equal), a dictionary column, a
    decimal, a column whose type differs between the sides, and strings whose lengths change
    without changing the bytes of the block (ab|c against a|bc)."""
    import random

    import pyarrow.compute as pc

    rnd = random.Random(seed)
    ids = sorted(rnd.sample(range(3 * n), n))
    f = [rnd.choice([1.5, -2.0, 0.0, 1e300]) for _ in ids]
    i = [rnd.randrange(-50, 50) for _ in ids]
    i32 = [None if rnd.random() < 0.05 else rnd.randrange(9) for _ in ids]
    s = [rnd.choice(["ab", "c", "", "a longer string, past sixteen bytes"]) for _ in ids]
    sn = [None if rnd.random() < 0.05 else x for x in s]
    old = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "f": f,
            "i": i,
            "i32": pa.array(i32, pa.int32()),
            "s": s,
            "sn": sn,
            "dict": pa.array(s).dictionary_encode(),
            "dec": pa.array([decimal.Decimal(x) for x in i], pa.decimal128(12, 2)),
            "w": pa.array(i, pa.int32()),
            "d": pa.array(i32, pa.int32()).cast(pa.date32()),
        }
    )
    cols = [c for c in old.column_names if c != "id"]
    rows = old.to_pylist()
    new_rows = []
    edges = {63, 64, 127, 128, 1000, n - 1}
    for k, r in enumerate(rows):
        r = dict(r)
        if k in edges or rnd.random() < 0.002:
            c = rnd.choice(cols)
            r[c] = (
                None
                if r[c] is not None and rnd.random() < 0.3
                else old.column(c)[rnd.randrange(n)].as_py()
            )
        if k % 997 == 5 and r["f"] == 0.0:
            r["f"] = -0.0  # equal to 0.0: no change
        if k % 1013 == 7:
            r["f"] = float("nan")
            rows[k]["f"] = float("nan")
        if k % 499 == 3 and k + 1 < n and r["s"] == "ab" and rows[k + 1]["s"] == "c":
            r["s"], rows[k + 1]["s"] = "a", "bc"
        if rnd.random() > 0.001:  # a few removed
            new_rows.append(r)
    old = pa.Table.from_pylist(rows, schema=old.schema)
    new_schema = old.schema.set(old.schema.get_field_index("w"), pa.field("w", pa.int64()))
    extra = [dict(rows[0], id=3 * n + k) for k in range(3)]
    new = pa.Table.from_pylist(new_rows + extra, schema=new_schema)
    # Another NaN's bits in new (hashes and the diff take every NaN as one value).
    f_new = new.column("f").to_numpy().copy()
    f_new.view(np.uint64)[np.isnan(f_new)] = np.uint64(0xFFF8000000000123)
    new = new.set_column(
        new.schema.get_field_index("f"),
        "f",
        pa.array(f_new, mask=pc.is_null(new.column("f")).to_numpy(zero_copy_only=False)),
    )
    return old, new, cols


@pytest.mark.parametrize(
    "seed,n,chunks", [(1, 5000, (5000, 5000)), (2, 6000, (700, 1024)), (3, 3000, (64, 129))]
)
def test_long_runs_merge_equals_hash_and_duckdb(seed: int, n: int, chunks: tuple[int, int]) -> None:
    old, new, cols = _long_pair(seed, n)
    old, new = chunked(old, chunks[0]), chunked(new, chunks[1])
    merged = backfill.diff(old, new, "id", threads=2)
    assert path(merged) == "merge"
    want = duckdb_diff(old, new, ["id"], cols)
    got = merged.summary.to_dict()
    for f in ("matched", "changed", "added", "removed"):
        assert got[f] == want[f], (f, got, want)
    by_col = {row["column"]: row for row in merged.columns.to_pylist()}
    for c in cols:
        assert by_col[c]["changed"] == want["changed_" + c], c
    rev = [("id", "descending")]
    hashed = backfill.diff(old.sort_by(rev), new.sort_by(rev), "id", threads=2)
    assert path(hashed) == "hash"
    assert hashed.summary == merged.summary
    fields = ["column", "changed", "null_to_value", "value_to_null", "max_abs_diff"]
    assert [[c[f] for f in fields] for c in hashed.columns.to_pylist()] == [
        [c[f] for f in fields] for c in merged.columns.to_pylist()
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 6),
            st.integers(0, 4),
            st.sampled_from([1.0, 2.0, None]),
            st.sampled_from(["keep", "keep", "modify", "delete"]),
        ),
        min_size=0,
        max_size=40,
    ),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 5)), max_size=5),
    st.sampled_from([pa.date32(), pa.int32()]),
    st.integers(1, 9),
    st.integers(1, 9),
)
def test_composite_sorted_keys_merge_and_match_duckdb(
    rows: list[tuple[int, int, float | None, str]],
    extra: list[tuple[int, int]],
    k2_type: pa.DataType,
    chunk_old: int,
    chunk_new: int,
) -> None:
    """Keys of two integer/date columns sorted lexicographically take the merge path, with the
    DuckDB oracle's counts and the hash path's result (the same rows shuffled)."""
    seen: dict[tuple[int, int], tuple[float | None, str]] = {}
    for a, b, v, op in rows:
        seen.setdefault((a, b), (v, op))
    old_rows = sorted(seen.items())
    new_rows = [
        (k, (2.0 if v is None else None) if op == "modify" else v)
        for k, (v, op) in old_rows
        if op != "delete"
    ]
    new_rows = sorted(
        dict(new_rows + [((a, b), 3.0) for a, b in extra if (a, b) not in seen]).items()
    )

    def table(items: list[Any], chunk: int, k1_type: pa.DataType) -> pa.Table:
        t = pa.table(
            {
                "k1": pa.array([k[0] for k, _ in items], k1_type),
                "k2": pa.array([k[1] for k, _ in items], pa.int32()).cast(k2_type),
                "v": pa.array([v for _, v in items], pa.float64()),
            }
        )
        return chunked(t, chunk)

    old = table([(k, v) for k, (v, _) in old_rows], chunk_old, pa.int64())
    new = table(new_rows, chunk_new, pa.int64())
    keys = ["k1", "k2"]
    r = check_against_oracle(old, new, keys, ["v"], threads=2)
    assert path(r) == "merge" or old.num_rows == 0 or new.num_rows == 0
    rev = [("k1", "descending"), ("k2", "descending")]
    h = backfill.diff(old.sort_by(rev), new.sort_by(rev), keys, threads=2)
    assert path(h) == "hash" or old.num_rows <= 1 or new.num_rows <= 1
    assert h.summary == r.summary
    assert h.columns.to_pylist()[0]["changed"] == r.columns.to_pylist()[0]["changed"]


def test_composite_key_step_down_in_second_column_falls_back() -> None:
    old = pa.table({"a": [1, 1, 2, 2], "b": [1, 2, 2, 1], "v": [1, 2, 3, 4]})
    new = pa.table({"a": [1, 1, 2, 2], "b": [1, 2, 1, 2], "v": [1, 2, 4, 3]})
    r = backfill.diff(old, new, ["a", "b"])
    assert path(r) == "hash"
    assert r.identical
    dup = pa.table({"a": [1, 1, 2], "b": [1, 1, 2], "v": [1, 2, 3]})
    r = backfill.diff(dup, new, ["a", "b"], on_duplicate="report")
    assert path(r) == "hash" and r.summary.duplicate_keys == 1


def test_date_key_against_an_integer_key_is_not_merged() -> None:
    """A date32 key merges only against a date32: days and integers are refused as keys of
    different types, never matched by their raw values."""
    old = pa.table({"k": pa.array([1, 2], pa.int32()).cast(pa.date32()), "v": [1, 2]})
    new = pa.table({"k": pa.array([1, 2], pa.int32()), "v": [1, 2]})
    with pytest.raises(backfill.BackfillError, match="same type"):
        backfill.diff(old, new, "k")
    r = backfill.diff(old, old, "k")
    assert path(r) == "merge" and r.identical
    # Integers of any width merge by value, in a composite key too.
    wide = pa.table({"a": pa.array([1, 2, 3], pa.int64()), "b": [5, 6, 7], "v": [1, 2, 3]})
    narrow = pa.table({"a": pa.array([1, 3, 4], pa.int16()), "b": [5, 7, 8], "v": [1, 9, 3]})
    r = backfill.diff(wide, narrow, ["a", "b"])
    assert path(r) == "merge"
    assert (r.summary.matched, r.summary.changed, r.summary.added, r.summary.removed) == (
        2,
        1,
        1,
        1,
    )
