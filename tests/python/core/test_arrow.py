"""The Arrow PyCapsule import path (any producer -> C++) and the export path (C++ -> any
consumer)."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import zoneinfo

import pyarrow as pa
import pytest

import backfill
from backfill import _core
from backfill._arrow import ArrowTable

UTC = dt.timezone.utc


def every_type_table() -> pa.Table:
    n = 4
    return pa.table(
        {
            "i8": pa.array([1, None, -128, 127], pa.int8()),
            "u16": pa.array([1, None, 0, 65535], pa.uint16()),
            "i32": pa.array([1, 2, None, -5], pa.int32()),
            "u64": pa.array([0, 2**64 - 1, None, 7], pa.uint64()),
            "f32": pa.array([1.5, float("nan"), None, -0.0], pa.float32()),
            "f64": pa.array([1e300, float("inf"), None, 2.5]),
            "dec": pa.array(
                [decimal.Decimal("1.23"), None, decimal.Decimal("-99.99"), decimal.Decimal("0.00")],
                pa.decimal128(6, 2),
            ),
            "b": pa.array([True, False, None, True]),
            "s": pa.array(["a", None, "", "héllo wörld, long enough"]),
            "ls": pa.array(["x", "y", None, "z"], pa.large_string()),
            "sv": pa.array(["short", "a string longer than twelve", None, ""], pa.string_view()),
            "bin": pa.array([b"\x00\x01", None, b"", b"abc"], pa.binary()),
            "d32": pa.array(
                [dt.date(2026, 8, 1), None, dt.date(1969, 12, 31), dt.date(1970, 1, 1)]
            ),
            "d64": pa.array(
                [dt.date(2026, 8, 1), None, dt.date(2000, 2, 29), dt.date(1970, 1, 1)], pa.date64()
            ),
            "ts_s": pa.array([0, 1, None, -1], pa.timestamp("s")),
            "ts_ms_tz": pa.array(
                [0, 1, None, 1_785_542_400_000], pa.timestamp("ms", "Europe/Berlin")
            ),
            "ts_us_utc": pa.array([0, 1, None, -1], pa.timestamp("us", "UTC")),
            "ts_ns": pa.array([0, 1000, None, 5], pa.timestamp("ns")),
            "t32": pa.array([0, 3_600_000, None, 86_399_999], pa.time32("ms")),
            "t64": pa.array([0, 1, None, 86_399_999_999], pa.time64("us")),
            "dur": pa.array([0, -1, None, 10**6], pa.duration("us")),
            "dict": pa.array(["a", "b", None, "a"]).dictionary_encode(),
            "null": pa.nulls(n),
            "lst": pa.array([[1, 2], None, [], [None, 3]], pa.list_(pa.int64())),
            "st": pa.array([{"x": 1}, None, {"x": None}, {"x": 4}], pa.struct([("x", pa.int32())])),
        }
    )


def test_import_copies_every_type_exactly() -> None:
    src = every_type_table()
    copied = pa.table(ArrowTable.from_arrow(src))
    # Logical types survive; strings/binary/lists come back as their large variants.
    for name in src.column_names:
        want = src[name].to_pylist()
        got = copied[name].to_pylist()
        if name in ("f32",):
            assert str(got) == str(want), name
        else:
            assert got == want, name


def test_python_values_match_pyarrow() -> None:
    src = every_type_table().drop_columns(["ts_ns", "f32", "t64"])  # ns and NaN compare oddly
    ours = ArrowTable.from_arrow(src)
    for name in src.column_names:
        assert ours[name] == src[name].to_pylist(), name
    assert ours.types["dec"] == "decimal128(6, 2)"
    assert ours.types["dict"] == "large_utf8"  # decoded by the copy


def test_builder_columns_read_by_pyarrow() -> None:
    t = pa.table(_core._arrow_builder_sample())
    assert t.schema.field("ts_s").type == pa.timestamp("s", "UTC")
    assert t.schema.field("ts_us").type == pa.timestamp("us", "Europe/Berlin")
    assert t.schema.field("l").type == pa.list_(pa.int64())
    assert t.schema.field("d").type == pa.date32()
    assert t.to_pylist()[0] == {
        "i64": 1,
        "i32": 7,
        "u64": 0,
        "f64": 0.5,
        "b": True,
        "s": "a",
        "ts_s": dt.datetime(1970, 1, 1, tzinfo=UTC),
        "ts_us": dt.datetime(1970, 1, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Berlin")),
        "d": dt.date(1970, 1, 1),
        "l": [1, 2],
    }
    ours = ArrowTable(_core._arrow_builder_sample())
    assert ours.to_pylist() == t.to_pylist()


def test_multi_batch_and_sliced_inputs() -> None:
    a = pa.table({"k": [1, 2, 3, 4, 5], "s": ["a", "b", "c", "d", "e"]})
    reader = pa.RecordBatchReader.from_batches(a.schema, a.to_batches(max_chunksize=2))
    assert ArrowTable.from_arrow(reader).to_pydict() == a.to_pydict()
    sliced = a.slice(1, 3)
    assert ArrowTable.from_arrow(sliced).to_pydict() == sliced.to_pydict()


def test_other_producers() -> None:
    polars = importlib.import_module("polars")
    duckdb = importlib.import_module("duckdb")
    pandas = importlib.import_module("pandas")
    want = {"k": [1, 2], "s": ["x", None]}
    assert ArrowTable.from_arrow(polars.DataFrame(want)).to_pydict() == want
    assert ArrowTable.from_arrow(pandas.DataFrame(want)).to_pydict() == want
    rel = duckdb.sql("select * from (values (1, 'x'), (2, null)) t(k, s) order by k")
    assert ArrowTable.from_arrow(rel).to_pydict() == want


class OnlyStream:
    def __init__(self, t: pa.Table) -> None:
        self._t = t

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._t.__arrow_c_stream__(requested_schema)


class OnlyArray:
    def __init__(self, b: pa.RecordBatch) -> None:
        self._b = b

    def __arrow_c_array__(self, requested_schema: object = None) -> object:
        return self._b.__arrow_c_array__(requested_schema)


def test_protocol_only_objects() -> None:
    t = pa.table({"k": [3, 1], "v": [0.5, None]})
    assert ArrowTable.from_arrow(OnlyStream(t)).to_pydict() == t.to_pydict()
    assert ArrowTable.from_arrow(OnlyArray(t.to_batches()[0])).to_pydict() == t.to_pydict()


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(backfill.InvalidInputError, match=r"Arrow-compatible.*list"):
        ArrowTable.from_arrow([1, 2, 3])
    with pytest.raises(backfill.InvalidInputError, match=r"column 'm'.*not support"):
        ArrowTable.from_arrow(
            pa.table({"m": pa.array([{"a": 1}], pa.map_(pa.string(), pa.int64()))})
        )
    with pytest.raises(backfill.InvalidInputError, match="expected a table"):
        ArrowTable.from_arrow(pa.array([1, 2]))


def test_result_object_surface() -> None:
    t = ArrowTable(_core._arrow_builder_sample())
    assert t.num_rows == len(t) == 3
    assert t.column_names[:3] == ["i64", "i32", "u64"]
    assert t["i64"] == t.column(0) == [1, None, 3]
    assert "ArrowTable(3 rows; i64: int64" in repr(t)
    assert "null" in str(t)
    html = t._repr_html_()
    assert html is not None and html.startswith("<table>") and "héllo" in html
    df = t.to_pandas()
    assert list(df.columns) == t.column_names and df["i32"].tolist() == [7, 8, 9]
    assert t.to_arrow().num_rows == 3
    # The capsule can be taken many times; each stream is independent.
    assert pa.table(t).equals(pa.table(t))


def test_html_repr_gives_up_on_large_tables() -> None:
    big = ArrowTable.from_arrow(pa.table({"k": list(range(1000))}))
    assert big._repr_html_() is None
    assert "... 990 more rows" in str(big)
