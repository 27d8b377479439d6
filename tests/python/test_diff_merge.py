"""The merge path (both sides sorted by one integer key) against the DuckDB oracle, and the
inputs that must fall back to the hash path (descending step, equal adjacent keys, null keys)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backfill
from diff_oracles import table_pairs
from test_diff import check_against_oracle


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
    assert [[c[f] for f in fields] for c in h.columns.to_pylist()] == \
        [[c[f] for f in fields] for c in back.columns.to_pylist()]
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
    new = _table(list(range(18)) + [19, 18])
    r = backfill.diff(old, new, "id")
    assert path(r) == "hash"
    assert r.identical and r.summary.matched == 20 and r.summary.changed == 0


def test_equal_adjacent_keys_fall_back_and_are_reported() -> None:
    old = _table(list(range(20)))
    new = _table(list(range(10)) + [9] + list(range(11, 20)))
    with pytest.raises(backfill.BackfillError, match=r"duplicate key in new: \(id=9\) appears 2"):
        backfill.diff(old, new, "id")
    r = backfill.diff(old, new, "id", on_duplicate="report")
    assert path(r) == "hash"
    assert (r.summary.duplicate_keys, r.summary.duplicate_rows_new, r.summary.removed) == (1, 2, 1)


def test_null_key_falls_back() -> None:
    r = backfill.diff(_table([1, 2, 3]), _table([1, None, 3]), "id")
    assert path(r) == "hash"
    assert (r.summary.null_keys_new, r.summary.removed) == (1, 1)
