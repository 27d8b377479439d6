"""backfill.fingerprint: order/chunking invariance, single-change sensitivity, partitions."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backfill
from diff_oracles import VALUE_TYPES, table_pairs

UTC = dt.timezone.utc


def rechunk(t: pa.Table, size: int) -> pa.Table:
    return pa.Table.from_batches(t.to_batches(max_chunksize=size), t.schema)


def relayout(t: pa.Table) -> pa.Table:
    """Same logical values, other physical layout: dictionaries and large strings."""
    cols = []
    for name in t.column_names:
        col = t[name]
        if pa.types.is_string(col.type):
            col = pc.dictionary_encode(col)
        elif pa.types.is_large_string(col.type):
            # Built from the values, chunk by chunk, not by cast: pyarrow 18-24's cast of a
            # large_string with nulls to string_view leaves an empty buffer slot, and exporting
            # that array crashes the process (fixed in pyarrow 25).
            col = pa.chunked_array(
                [pa.array(c.to_pylist(), type=pa.string_view()) for c in col.chunks],
                type=pa.string_view(),
            )
        cols.append(col)
    return pa.table(dict(zip(t.column_names, cols, strict=True)))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_pairs(), st.randoms(use_true_random=False), st.integers(1, 5))
def test_permutation_chunking_and_layout_invariance(pair: Any, rnd: Any, chunk: int) -> None:
    old = pair[0]
    order = list(range(old.num_rows))
    rnd.shuffle(order)
    shuffled = old.take(pa.array(order, pa.int64()))
    base = backfill.fingerprint(old)
    assert backfill.fingerprint(rechunk(shuffled, chunk), threads=2) == base
    assert backfill.fingerprint(relayout(shuffled)) == base
    assert base.rows == old.num_rows
    # column order does not matter either: columns fold in name order
    assert backfill.fingerprint(old.select(list(reversed(old.column_names)))) == base


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_pairs(dups=True))
def test_matches_the_multiset_of_rows(pair: Any) -> None:
    old, new = pair[0], pair[1]

    def norm(v: Any) -> Any:
        return 0.0 if isinstance(v, float) and v == 0 else v  # -0.0 == 0.0, as in the diff

    def multiset(t: pa.Table) -> list[str]:
        return sorted(repr(sorted((k, norm(v)) for k, v in r.items())) for r in t.to_pylist())

    same = multiset(old) == multiset(new)
    assert (backfill.fingerprint(old) == backfill.fingerprint(new)) == same


def test_single_change_in_every_type_is_seen_with_its_column() -> None:
    samples = {
        "i64": [1, 2],
        "i32": [1, 2],
        "u8": [1, 2],
        "f64": [0.5, 1.5],
        "f32": [0.5, 1.5],
        "s": ["a", "b"],
        "ls": ["a", "b"],
        "bin": [b"a", b"b"],
        "b": [True, False],
        "d": [dt.date(2020, 1, 1), dt.date(2020, 1, 2)],
        "ts": [1, 2],
        "ts_ns": [1, 2],
        "d64": [dt.date(2020, 1, 1), dt.date(2020, 1, 2)],
        "lbin": [b"a", b"b"],
        "dec": [decimal.Decimal("1.00"), decimal.Decimal("2.00")],
        "dur": [1, 2],
        "t": [1, 2],
    }
    for name, (typ, _) in VALUE_TYPES.items():
        a, b = samples[name]
        base = pa.table({"id": [1, 2, 3], name: pa.array([a, a, None], typ)})
        for changed in ([a, b, None], [a, a, a], [a, None, None]):
            other = pa.table({"id": [1, 2, 3], name: pa.array(changed, typ)})
            fa, fb = backfill.fingerprint(base), backfill.fingerprint(other)
            assert fa != fb, (name, changed)
            assert fa.differing_columns(fb) == [name], name
    nested = pa.table({"l": pa.array([[1, 2], [3]], pa.list_(pa.int64()))})
    nested2 = pa.table({"l": pa.array([[1, 2], [3, None]], pa.list_(pa.int64()))})
    assert backfill.fingerprint(nested) != backfill.fingerprint(nested2)
    assert backfill.fingerprint(nested) == backfill.fingerprint(
        pa.table({"l": pa.array([[3], [1, 2]], pa.large_list(pa.int32()))})
    )


def test_rows_added_removed_and_duplicates_count() -> None:
    t = pa.table({"a": [1, 2], "b": ["x", "y"]})
    dup = pa.concat_tables([t, t.slice(0, 1)])
    twice = pa.concat_tables([t, t.slice(0, 1), t.slice(0, 1)])
    fps = {backfill.fingerprint(x).digest for x in (t, dup, twice, t.slice(0, 1))}
    assert len(fps) == 4  # XOR would make t == twice
    assert backfill.fingerprint(twice).rows == 4


def test_nulls_differ_from_every_value() -> None:
    for typ, value in [
        (pa.int64(), 0),
        (pa.string(), ""),
        (pa.bool_(), False),
        (pa.float64(), float("nan")),
        (pa.binary(), b""),
    ]:
        with_null = pa.table({"c": pa.array([None], typ)})
        with_value = pa.table({"c": pa.array([value], typ)})
        assert backfill.fingerprint(with_null) != backfill.fingerprint(with_value), typ
    # a value moved to another column is a change (columns are seeded by name)
    assert backfill.fingerprint(pa.table({"a": [1], "b": [2]})) != backfill.fingerprint(
        pa.table({"a": [2], "b": [1]})
    )


def test_per_partition_equals_fingerprinting_each_partition() -> None:
    tz = "America/New_York"
    start = dt.datetime(2026, 11, 1, tzinfo=UTC)
    times = [start + dt.timedelta(minutes=37 * i) for i in range(300)] + [None]
    t = pa.table({"at": pa.array(times, pa.timestamp("us", "UTC")), "v": [*range(300), 7]})
    fp = backfill.fingerprint(t, partition_by="at", tz=tz)
    assert fp.partitions is not None
    labels = fp.partitions["partition"]
    assert labels[-1] is None and labels[:-1] == sorted(labels[:-1])
    assert sum(fp.partitions["rows"]) == t.num_rows and fp == backfill.fingerprint(t)
    for row in fp.partitions.to_pylist():
        if row["partition"] is None:
            mask = pc.is_null(t["at"])
        else:
            mask = pc.and_(
                pc.greater_equal(t["at"], pa.scalar(row["start"], pa.timestamp("us", "UTC"))),
                pc.less(t["at"], pa.scalar(row["end"], pa.timestamp("us", "UTC"))),
            )
        alone = backfill.fingerprint(t.filter(mask))
        assert alone.digest == row["digest"]
        assert fp.partition(row["partition"]) == alone
    # the DST day in New York is 25 hours long
    nov1 = next(r for r in fp.partitions.to_pylist() if r["partition"] == "2026-11-01")
    assert (nov1["end"] - nov1["start"]) == dt.timedelta(hours=25)


def test_options_and_errors() -> None:
    t = pa.table({"id": [1, 2], "v": [1.0, 2.0], "s": ["a", "b"]})
    only = backfill.fingerprint(t, columns=["v", "id"])
    assert list(only.columns) == ["id", "v"]
    assert only == backfill.fingerprint(t.select(["id", "v"]))
    with pytest.raises(backfill.NotFoundError, match="fingerprint column 'zz' is not in the table"):
        backfill.fingerprint(t, columns=["zz"])
    with pytest.raises(backfill.InvalidInputError, match="partition_by column 's' has type utf8"):
        backfill.fingerprint(t, partition_by="s")
    with pytest.raises(backfill.InvalidInputError, match="Arrow-compatible"):
        backfill.fingerprint([1, 2])
    fp = backfill.fingerprint(t)
    with pytest.raises(backfill.InvalidInputError, match="no partitions"):
        fp.partition("2026-01-01")
    other = backfill.fingerprint(t)
    object.__setattr__(other, "kind", "duckdb.sql-hash.v1")
    assert fp != other
    with pytest.raises(backfill.InvalidInputError, match="different kinds"):
        fp.differing_columns(other)


def test_result_surface() -> None:
    t = pa.table({"id": [1, 2], "s": ["a", None]})
    fp = backfill.fingerprint(t)
    assert len(fp.digest) == 32 and int(fp.digest, 16) >= 0
    assert hash(fp) == hash(backfill.fingerprint(t))
    assert "rows=2" in repr(fp) and fp.digest in str(fp)
    assert pa.table(fp).column_names == ["column", "digest"]
    assert fp.to_pandas()["column"].tolist() == ["id", "s"]
    assert "<table>" in (fp._repr_html_() or "")
    empty = backfill.fingerprint(t.slice(0, 0))
    assert empty.rows == 0 and empty != fp
