"""diff_tables with a Spark/Iceberg side (in the test session's one SparkSession): the canonical
row encoding computed by Spark SQL equals the plain-Python oracle (canonical_oracle) and DuckDB's,
PostgreSQL's and Parquet's for the same rows of every encoded type; diff_tables between Spark and
DuckDB, PostgreSQL and Parquet equals backfill.diff of the same rows read whole into Arrow and the
differences counted in Python; a type the two engines hold differently is reported per column;
every query reads the snapshot pinned when the table opened; a project's model is a side
(``project=``, ``backfill diff --project``)."""

from __future__ import annotations

import datetime as dt
import math
import random
import uuid
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backfill
import canonical_oracle as oracle
import plan_helpers  # noqa: F401 - puts benchmarks/ on sys.path
import spark_support
from backfill.calendar import partitions
from backfill.engines import Part, PartitionFingerprint
from backfill.engines.locations import TableSource, open_table
from backfill.engines.sql.canonical import Encoded, Encoding, segments_scan
from backfill.errors import InvalidInputError, NotFoundError
from diff_oracles import assert_same_diff_tables

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 3, 1, tzinfo=UTC)
DAYS = 10
PARTS: list[Part] = [
    (p.label, p.start, p.end)
    for p in partitions("day", DAY0, DAY0 + dt.timedelta(days=DAYS), "UTC")
]

# name -> (encoding, Arrow type, DuckDB type, PostgreSQL type, Spark type): the warehouses hold
# some values in types of other widths and scales whose logical values are the same (an int
# against a bigint, decimal(18,2) against numeric(24,6) and decimal(38,10)).
COLUMNS: dict[str, tuple[Encoding, pa.DataType, str, str, str]] = {
    "region": (Encoding.STRING, pa.string(), "VARCHAR", "text", "string"),
    "id": (Encoding.EXACT, pa.int64(), "BIGINT", "bigint", "bigint"),
    "n": (Encoding.EXACT, pa.int32(), "INTEGER", "bigint", "int"),
    "amount": (
        Encoding.EXACT,
        pa.decimal128(18, 2),
        "DECIMAL(18,2)",
        "numeric(24,6)",
        "decimal(38,10)",
    ),
    "rate": (Encoding.EXACT, pa.decimal128(9, 4), "DECIMAL(9,4)", "numeric(9,4)", "decimal(9,4)"),
    "x": (Encoding.FLOAT, pa.float64(), "DOUBLE", "double precision", "double"),
    "f": (Encoding.FLOAT, pa.float32(), "FLOAT", "real", "float"),
    "s": (Encoding.STRING, pa.string(), "VARCHAR", "text", "string"),
    "b": (Encoding.BOOLEAN, pa.bool_(), "BOOLEAN", "boolean", "boolean"),
    "d": (Encoding.DATE, pa.date32(), "DATE", "date", "date"),
    "naive": (Encoding.TIMESTAMP, pa.timestamp("us"), "TIMESTAMP", "timestamp", "timestamp_ntz"),
    "at": (
        Encoding.TIMESTAMP,
        pa.timestamp("us", tz="UTC"),
        "TIMESTAMPTZ",
        "timestamptz",
        "timestamp",
    ),
}
ENCODED = [Encoded(name, enc) for name, (enc, *_) in COLUMNS.items()]
ENCODINGS = {name: enc.value for name, (enc, *_) in COLUMNS.items()}
KEY = ["region", "id"]
SIDES = ("spark", "duckdb", "postgres", "parquet")


def _q(name: str) -> str:
    return '"' + name + '"'


def _arrow(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, Any] = COLUMNS) -> pa.Table:
    return pa.table({c: pa.array([r[c] for r in rows], spec[1]) for c, spec in columns.items()})


class Warehouses:
    """Rows put into a Spark/Iceberg folder catalog (the session's one SparkSession), a DuckDB
    file, a PostgreSQL database and Parquet files, each in its own column types; ``load``
    returns the location ``diff_tables`` reads it at."""

    def __init__(self, pg_url: str, folder: Path) -> None:
        from backfill.engines.spark import SparkEngine

        spark_support.ensure_plugin()
        self.folder = folder
        self.iceberg = folder / "iceberg"
        self.iceberg.mkdir()
        self.engine = SparkEngine(self.iceberg, master="local[2]", conf=spark_support.CONF)
        self.spark = self.engine.spark
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.engine._ns('x')}")
        self.duck_path = folder / "side.duckdb"
        self.pg_url = pg_url

    def load(
        self,
        side: str,
        rows: Sequence[Mapping[str, Any]],
        columns: Mapping[str, tuple[Encoding, pa.DataType, str, str, str]] = COLUMNS,
    ) -> str:
        name = f"t_{uuid.uuid4().hex[:8]}"
        table = _arrow(rows, columns)
        if side == "spark":
            from backfill.engines.spark.tables import utc_timestamps

            view = f"incoming_{name}"
            # Naive timestamps travel as UTC instants and become wall time again in the
            # session's UTC (TIMESTAMP_NTZ); every other column is cast to its Spark type.
            self.spark.createDataFrame(utc_timestamps(table)).createOrReplaceTempView(view)
            cols = ", ".join(f"CAST(`{c}` AS {spec[4]}) AS `{c}`" for c, spec in columns.items())
            self.spark.sql(
                f"CREATE TABLE {self.engine.table(name, 'x')} USING iceberg "
                f"PARTITIONED BY (days(`at`)) AS SELECT {cols} FROM {view}"
                if "at" in columns
                else f"CREATE TABLE {self.engine.table(name, 'x')} USING iceberg "
                f"AS SELECT {cols} FROM {view}"
            )
            self.spark.catalog.dropTempView(view)
            return f"iceberg://{self.iceberg}#x.{name}"
        if side == "duckdb":
            con = duckdb.connect(str(self.duck_path))
            try:
                cols = ", ".join(
                    f"CAST({_q(c)} AS {spec[2]}) AS {_q(c)}" for c, spec in columns.items()
                )
                con.register("incoming", table)
                con.execute(f"CREATE TABLE main.{name} AS SELECT {cols} FROM incoming")
            finally:
                con.close()
            return f"duckdb://{self.duck_path}#main.{name}"
        if side == "postgres":
            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                conn.execute("SET TimeZone TO 'UTC'")
                defs = ", ".join(f"{_q(c)} {spec[3]}" for c, spec in columns.items())
                conn.execute(f"CREATE TABLE public.{name} ({defs})")
                with conn.cursor().copy(
                    f"COPY public.{name} ({', '.join(map(_q, columns))}) FROM STDIN"
                ) as copy:
                    for r in rows:
                        copy.write_row([r[c] for c in columns])
            return f"{self.pg_url}#public.{name}"
        assert side == "parquet"
        path = self.folder / f"{name}.parquet"
        pq.write_table(table, path)
        return str(path)


@pytest.fixture(scope="module")
def wh(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouses]:
    yield Warehouses(pg_server.create_database("xspark"), tmp_path_factory.mktemp("xspark"))


# -- the canonical encoding on Spark ---------------------------------------------------------------
def _segments(source: TableSource) -> dict[str, PartitionFingerprint]:
    kind = next(c.kind for c in source.columns if c.name == "at")
    sql = segments_scan(source.dialect, source.relation, ENCODED, ("at", kind), PARTS)
    labels = {i: label for i, (label, _, _) in enumerate(PARTS)} | {-1: "null"}
    got = {
        labels[int(str(i))]: PartitionFingerprint.of(int(str(n)), int(str(h)))
        for i, n, h in source.rows(sql)
    }
    return {k: v for k, v in got.items() if v.rows}


def _label(row: Mapping[str, Any]) -> str:
    return "null" if row["at"] is None else PARTS[(row["at"] - DAY0).days][0]


def _expected(rows: Sequence[Mapping[str, Any]]) -> dict[str, PartitionFingerprint]:
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(_label(r), []).append(r)
    return {
        label: PartitionFingerprint.of(*oracle.fingerprint(part, ENCODINGS))
        for label, part in by.items()
    }


def _everywhere(wh: Warehouses, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    found = {}
    for side in SIDES:
        with open_table(wh.load(side, rows)) as source:
            found[side] = _segments(source)
    return found


def _nullable(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | s


rows_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "region": st.sampled_from(["a", "b", "é"]),
            "n": _nullable(st.integers(-(2**31), 2**31 - 1)),
            "amount": _nullable(
                st.decimals(-(10**15), 10**15, places=2, allow_nan=False, allow_infinity=False)
            ),
            "rate": _nullable(
                st.decimals(
                    -(10**5) + 1, 10**5 - 1, places=4, allow_nan=False, allow_infinity=False
                )
            ),
            "x": _nullable(st.floats(allow_nan=True, allow_infinity=True)),
            "f": _nullable(st.floats(width=32, allow_nan=True, allow_infinity=True)),
            # PostgreSQL text holds no NUL; '|', '~' and ':' are the encoding's own characters
            "s": _nullable(
                st.text(
                    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
                    | st.sampled_from("|~:0")
                )
            ),
            "b": _nullable(st.booleans()),
            "d": _nullable(st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
            "naive": _nullable(st.datetimes(dt.datetime(1800, 1, 1), dt.datetime(2300, 1, 1))),
            "at": _nullable(
                st.datetimes(
                    DAY0.replace(tzinfo=None),
                    (DAY0 + dt.timedelta(days=DAYS, microseconds=-1)).replace(tzinfo=None),
                ).map(lambda t: t.replace(tzinfo=UTC))
            ),
        }
    ),
    max_size=25,
)


@settings(
    max_examples=6,  # each loads four warehouses; Spark costs ~2 s a load
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=rows_strategy)
def test_spark_fingerprints_equal_the_oracle_and_every_engine(
    wh: Warehouses, rows: list[dict[str, Any]]
) -> None:
    rows = [{**r, "id": i} for i, r in enumerate(rows)]
    got = _everywhere(wh, rows)
    expected = _expected(rows)
    for side in SIDES:
        assert got[side] == expected, side


FLOATS = (
    0.0,
    -0.0,
    0.1,
    -2.5,
    1e15,
    1234567890123456.8,
    3.0925352787701443e18,
    5e-324,
    2.2250738585072014e-308,
    2.225073858507201e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    2.0**-1022,
    2.0**1023,
    1 - 2.0**-53,
    9007199254740993.0,
)
EDGES: list[dict[str, Any]] = (
    [{"x": v} for v in FLOATS]
    + [  # single precision: float32(0.1), the smallest subnormal, the largest float32
        {"f": v}
        for v in (0.10000000149011612, -0.0, 2.0**-149, 3.4028234663852886e38, float("nan"))
    ]
    + [
        {"amount": Decimal(v)}
        for v in ("0.00", "-0.01", "1.50", "10.00", "100", "-999999999999999.99")
    ]
    + [{"rate": Decimal(v)} for v in ("0.0000", "0.0001", "-99999.9999", "2.5000")]
    + [{"n": v} for v in (0, -1, 2**31 - 1, -(2**31))]
    + [{"s": v} for v in ("", "|", "~", "1:a", "é", "e\u0301", "😀", " ", "0.10")]
    + [{"d": v} for v in (dt.date(1, 1, 1), dt.date(1582, 10, 4), dt.date(9999, 12, 31))]
    + [
        {"naive": v}
        for v in (dt.datetime(1800, 1, 1, 0, 0, 0, 1), dt.datetime(1969, 12, 31, 23, 59, 59))
    ]
    + [{"b": v} for v in (True, False)]
)


def test_edge_values_on_spark(wh: Warehouses) -> None:
    """Floats at the ends of the binary exponents (subnormals, the largest double, a single
    precision float), decimal zeros and trailing zeros at every scale (Spark prints 0 in
    decimal(38,10) as 0.0000000000), the ends of the int and date ranges, a date of the Julian
    calendar switch, microseconds before 1970, strings made of the encoding's own characters."""
    blank = dict.fromkeys(COLUMNS)
    rows = [{**blank, **e, "region": "a", "at": DAY0, "id": i} for i, e in enumerate(EDGES)]
    got = _everywhere(wh, rows)
    expected = _expected(rows)
    for side in SIDES:
        assert got[side] == expected, side


def test_a_changed_value_changes_its_spark_segment_only(wh: Warehouses) -> None:
    blank = dict.fromkeys(COLUMNS)
    base = [
        {
            **blank,
            "region": "a",
            "id": i,
            "x": i / 3,
            "amount": Decimal(i) / 4,
            "at": DAY0 + dt.timedelta(hours=7 * i),
        }
        for i in range(12)
    ]
    with open_table(wh.load("spark", base)) as source:
        before = _segments(source)
    assert before == _expected(base)
    for change in ({"x": 2 / 3 + 2.0**-52}, {"amount": Decimal("0.51")}, {"s": ""}, {"id": 99}):
        rows = [dict(r) for r in base]
        rows[2].update(change)  # day 2024-03-01
        with open_table(wh.load("spark", rows)) as source:
            after = _segments(source)
        assert after["2024-03-01"] != before["2024-03-01"], change
        assert {k: v for k, v in after.items() if k != "2024-03-01"} == {
            k: v for k, v in before.items() if k != "2024-03-01"
        }


# -- diff_tables with a Spark side -----------------------------------------------------------------
_VALUES = {
    "x": [0.0, -0.0, 1.5, -1e300, 5e-324, float("nan"), float("inf"), float("-inf"), None],
    "f": [0.5, -0.0, 3.0, 1.25, float("nan"), None],  # exact in single precision
    "s": ["", "é|~", "😀", "z", "0", None],
    "naive": [
        dt.datetime(1900, 1, 1),
        dt.datetime(2024, 3, 1, 12, 0, 0, 1),
        dt.datetime(2300, 1, 1),
        None,
    ],
    "d": [dt.date(1, 1, 1), dt.date(2024, 2, 29), dt.date(9999, 12, 31), None],
}


def _tables(seed: int, n: int = 300) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(old, new) rows over 10 days, a few without ``at``: new changes values of every type in
    days 2 and 5 (and turns 0.0 into -0.0 in day 4: equal), drops day 7 whole, removes keys
    and adds keys in day 3."""
    rng = random.Random(seed)
    old = []
    for i in range(n):
        at = None if rng.random() < 0.02 else DAY0 + dt.timedelta(seconds=rng.randrange(10 * 86400))
        old.append(
            {
                "region": rng.choice("ab"),
                "id": i,
                "n": None if rng.random() < 0.1 else rng.randrange(-(2**31), 2**31),
                "amount": None
                if rng.random() < 0.1
                else Decimal(rng.randrange(-(10**8), 10**8)).scaleb(-2),
                "rate": Decimal(rng.randrange(-(10**8), 10**8)).scaleb(-4),
                "b": rng.choice([True, False, None]),
                "at": at,
                **{c: rng.choice(v) for c, v in _VALUES.items()},
            }
        )
    new = []
    for r in old:
        day = None if r["at"] is None else (r["at"] - DAY0).days
        if day == 7 or (day == 3 and r["id"] % 5 == 0):
            continue
        r = dict(r)
        if day in (2, 5) and r["id"] % 4 == 0:
            column = rng.choice(["amount", "rate", "x", "f", "s", "b", "d", "naive", "n"])
            if column in ("amount", "rate"):
                r[column] = (r[column] or Decimal(0)) + 1
            elif column in ("x", "f"):
                r[column] = 2.0 if r[column] != 2.0 else 4.0
            elif column == "s":
                r[column] = (r[column] or "") + "ü"
            elif column == "b":
                r[column] = not r[column]
            elif column == "d":
                r[column] = dt.date(2000, 1, 1) if r[column] != dt.date(2000, 1, 1) else None
            elif column == "naive":
                r[column] = (r[column] or dt.datetime(2000, 1, 1)) + dt.timedelta(microseconds=1)
            else:
                r[column] = 7 if r[column] != 7 else None
        if day == 4 and r["x"] == 0.0:
            r["x"] = -0.0  # the same value: diff and encoding alike
        new.append(r)
    new += [
        {
            **dict.fromkeys(COLUMNS),
            "region": "c",
            "id": n + i,
            "at": DAY0 + dt.timedelta(days=3, hours=i),
            "amount": Decimal("1.5"),
            "x": 2.0,
            "s": "new",
        }
        for i in range(5)
    ]
    return old, new


def _counted(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, int], list[str]]:
    """The differences counted in Python (values equal when their canonical tokens are: NaN is
    NaN, -0.0 is 0.0) and the partitions whose rows differ."""
    by_old = {(r["region"], r["id"]): r for r in old}
    by_new = {(r["region"], r["id"]): r for r in new}
    same = [
        k
        for k in by_old.keys() & by_new.keys()
        if all(
            oracle.token(by_old[k][c], ENCODINGS[c]) == oracle.token(by_new[k][c], ENCODINGS[c])
            for c in COLUMNS
        )
    ]
    counts = {
        "matched": len(by_old.keys() & by_new.keys()),
        "unchanged": len(same),
        "changed": len(by_old.keys() & by_new.keys()) - len(same),
        "added": len(by_new.keys() - by_old.keys()),
        "removed": len(by_old.keys() - by_new.keys()),
    }
    fa, fb = _expected(old), _expected(new)
    return counts, sorted(lb for lb in fa.keys() | fb.keys() if fa.get(lb) != fb.get(lb))


def _whole(location: str) -> Any:
    """Every row of the table at ``location`` as Arrow (UTC spelled one way)."""
    with open_table(location) as src:
        table = src.arrow(f"SELECT * FROM {src.relation} t")
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit, "UTC"))
        if pa.types.is_timestamp(f.type) and f.type.tz is not None
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def _without_types(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # diff_tables streams an integer column of two widths as BIGINT on both sides and every
    # float column as double (one type: compared by hash); the whole tables keep the engines'
    # own widths (compared value by value). The counts are the same.
    drop = ("old_type", "new_type", "compare")
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


@pytest.mark.parametrize(
    ("old_side", "new_side", "seed"),
    [("spark", "duckdb", 1), ("postgres", "spark", 2), ("spark", "parquet", 3)],
)
def test_diff_tables_with_spark_equals_the_arrow_diff(
    wh: Warehouses, old_side: str, new_side: str, seed: int
) -> None:
    old, new = _tables(seed)
    a, b = wh.load(old_side, old), wh.load(new_side, new)
    # measures=[]: the sums are test_spark_sums_the_measures_as_the_arrow_diff's (here the
    # whole tables keep each engine's integer and float widths, which diff_tables unifies)
    got = backfill.diff_tables(a, b, KEY, partition_by="at", grain="day", measures=[])
    want = backfill.diff(_whole(a), _whole(b), KEY, partition_by="at", measures=[])
    assert got.summary == want.summary
    assert got.partitions.to_pylist() == want.partitions.to_pylist()
    assert _without_types(got.columns.to_pylist()) == _without_types(want.columns.to_pylist())
    assert got.changed_sample.to_pylist() == want.changed_sample.to_pylist()
    counts, differing = _counted(old, new)
    s = got.summary
    assert (s.matched, s.unchanged, s.changed, s.added, s.removed) == (
        counts["matched"],
        counts["unchanged"],
        counts["changed"],
        counts["added"],
        counts["removed"],
    )
    assert got.streamed == differing
    assert "2024-03-05" not in got.streamed  # 0.0 -> -0.0 only: equal fingerprints
    spark = "a" if old_side == "spark" else "b"
    assert got.snapshots[spark].startswith("Iceberg snapshot ")
    # the same rows on both sides: nothing streamed, nothing changed (the decimal columns'
    # scales still differ: schema_changed, as backfill.diff says of the whole tables)
    same = backfill.diff_tables(a, wh.load(new_side, old), KEY, partition_by="at", measures=[])
    assert same.streamed == [] and same.summary.unchanged == len(old)
    assert (same.summary.changed, same.summary.added, same.summary.removed) == (0, 0, 0)


def test_spark_bisects_by_key_ranges_as_duckdb(wh: Warehouses) -> None:
    """With a bisection threshold of 4 rows, the differing days of a Spark side are cut into
    key ranges fingerprinted by Spark (the sampling, range and row statements in Spark SQL,
    the hash summed in pieces): the result is still backfill.diff's, from fewer rows."""
    old, new = _tables(4)
    a, b = wh.load("spark", old), wh.load("duckdb", new)
    options: dict[str, Any] = {"partition_by": "at", "grain": "day", "measures": []}
    got = backfill.diff_tables(a, b, KEY, bisection_threshold=4, **options)
    want = backfill.diff(_whole(a), _whole(b), KEY, **options)
    assert got.summary == want.summary
    assert got.partitions.to_pylist() == want.partitions.to_pylist()
    assert got.changed_sample.to_pylist() == want.changed_sample.to_pylist()
    assert len(got.levels) > 1 and got.streamed_ranges
    whole = backfill.diff_tables(a, b, KEY, **options)
    assert sum(got.streamed_rows) < sum(whole.streamed_rows)


NAIVE: dict[str, tuple[Encoding, pa.DataType, str, str, str]] = {
    "id": (Encoding.EXACT, pa.int64(), "BIGINT", "bigint", "bigint"),
    "at": (Encoding.TIMESTAMP, pa.timestamp("us"), "TIMESTAMP", "timestamp", "timestamp_ntz"),
    "amount": (
        Encoding.EXACT,
        pa.decimal128(18, 2),
        "DECIMAL(18,2)",
        "numeric(18,2)",
        "decimal(18,2)",
    ),
}


def test_spark_naive_partitions_are_local_days(wh: Warehouses) -> None:
    """A TIMESTAMP_NTZ partition column in America/New_York: Spark's segment scan puts a row
    of 01:00 local in that local day, as backfill.diff does (its UTC digits are the day
    before's), and only the changed local day is streamed."""
    rng = random.Random(5)
    old = [
        {
            "id": i,
            "at": dt.datetime(2024, 3, 8)
            + dt.timedelta(hours=rng.choice([0, 1, 3, 22, 23]) + 24 * d),
            "amount": Decimal(rng.randrange(10**5)).scaleb(-2),
        }
        for i, d in enumerate(rng.randrange(4) for _ in range(60))
    ]
    new = [dict(r) for r in old]
    early = next(r for r in new if r["at"].day == 10 and r["at"].hour < 5)
    early["amount"] += 1
    a, b = wh.load("spark", old, NAIVE), wh.load("postgres", new, NAIVE)
    options: dict[str, Any] = {"partition_by": "at", "grain": "day", "tz": "America/New_York"}
    got = backfill.diff_tables(a, b, "id", **options)
    want = backfill.diff(_arrow(old, NAIVE), _arrow(new, NAIVE), "id", **options)
    assert got.summary == want.summary
    assert got.partitions.to_pylist() == want.partitions.to_pylist()
    assert got.streamed == ["2024-03-10"]


# the measures' columns, in the same types on every side (the whole tables' diff is the oracle)
MEASURED: dict[str, tuple[Encoding, pa.DataType, str, str, str]] = {
    "id": (Encoding.EXACT, pa.int64(), "BIGINT", "bigint", "bigint"),
    "at": (
        Encoding.TIMESTAMP,
        pa.timestamp("us", tz="UTC"),
        "TIMESTAMPTZ",
        "timestamptz",
        "timestamp",
    ),
    "amount": (
        Encoding.EXACT,
        pa.decimal128(18, 2),
        "DECIMAL(18,2)",
        "numeric(18,2)",
        "decimal(18,2)",
    ),
    "big": (
        Encoding.EXACT,
        pa.decimal128(38, 4),
        "DECIMAL(38,4)",
        "numeric(38,4)",
        "decimal(38,4)",
    ),
    "huge": (Encoding.EXACT, pa.int64(), "BIGINT", "bigint", "bigint"),
    "x": (Encoding.FLOAT, pa.float64(), "DOUBLE", "double precision", "double"),
    "u": (
        Encoding.EXACT,
        pa.decimal128(38, 10),
        "DECIMAL(38,10)",
        "numeric(38,10)",
        "decimal(38,10)",
    ),
}
EXACT_MEASURES = ["amount", "big", "huge", "u"]


def _measured(seed: int, n: int = 200) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(old, new) over 8 days: ``huge`` near 2^61 (every day's sum leaves int64), ``big`` of 26
    digits, ``u`` with 10 decimals; new changes measures in days 1 and 4 and drops day 6."""
    rng = random.Random(seed)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    old = [
        {
            "id": i,
            "at": maybe(DAY0 + dt.timedelta(seconds=rng.randrange(8 * 86400))),
            "amount": maybe(Decimal(rng.randrange(-(10**8), 10**8)).scaleb(-2)),
            "big": maybe(Decimal(rng.randrange(-(10**30), 10**30)).scaleb(-4)),
            "huge": maybe(rng.randrange(2**60, 2**61)),
            "x": maybe(rng.uniform(-1e6, 1e6)),
            "u": maybe(Decimal(rng.randrange(-(10**15), 10**15)).scaleb(-10)),
        }
        for i in range(n)
    ]
    new = []
    for r in old:
        day = None if r["at"] is None else (r["at"] - DAY0).days
        if day == 6:
            continue
        if day in (1, 4) and r["id"] % 3 == 0:
            r = {**r, "amount": (r["amount"] or 0) + Decimal("0.01"), "huge": 2**61, "x": 0.5}
        new.append(r)
    return old, new


@pytest.mark.parametrize(("old_side", "new_side"), [("spark", "duckdb"), ("postgres", "spark")])
def test_spark_sums_the_measures_as_the_arrow_diff(
    wh: Warehouses, old_side: str, new_side: str
) -> None:
    """The measures summed by Spark in its segment scan (integers as DECIMAL(38,0): a BIGINT
    sum would leave 64 bits) give the per-column and per-partition sums of backfill.diff over
    the same rows, and each equal partition's sums are the other engine's, digit for digit."""
    old, new = _measured(7)
    a, b = wh.load(old_side, old, MEASURED), wh.load(new_side, new, MEASURED)
    got = backfill.diff_tables(a, b, "id", partition_by="at")
    want = backfill.diff(_whole(a), _whole(b), "id", partition_by="at")
    assert got.summary == want.summary and got.measures == want.measures
    assert_same_diff_tables(got, want, floats=("x",))
    assert got.streamed == ["2024-03-02", "2024-03-05", "2024-03-07"]
    for label, (sums_a, sums_b) in got.segment_sums.items():
        if label not in got.streamed:
            assert {m: sums_a[m] for m in EXACT_MEASURES} == {
                m: sums_b[m] for m in EXACT_MEASURES
            }, label
    # each measure's totals at its own type (the per-column table shares a float one with x)
    assert got.measure_totals["huge"][0] == sum(r["huge"] or 0 for r in old)  # past int64
    assert got.measure_totals["u"][1] == sum(r["u"] or 0 for r in new)


def test_spark_streams_a_few_partitions_a_query(
    wh: Warehouses, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table of a project's Spark catalog named ``schema.table`` (``project=``), whose engine
    streams 2 partitions a query (``stream_periods: 2``): the differing days take a query per
    two, and the result is the one of the whole tables."""
    from backfill.engines.spark.pinned import PinnedIcebergTable

    old, _ = _tables(4, 200)
    new = [{**r, "amount": (r["amount"] or Decimal(0)) + 1} if r["id"] % 7 == 0 else r for r in old]
    a, b = wh.load("duckdb", old), wh.load("spark", new)
    root = _spark_project(tmp_path / "p", str(wh.iceberg), "  stream_periods: 2\n")
    queries: list[str] = []
    original = PinnedIcebergTable.arrow

    def counted(self: PinnedIcebergTable, sql: str) -> Any:
        queries.append(sql)
        return original(self, sql)

    monkeypatch.setattr(PinnedIcebergTable, "arrow", counted)
    got = backfill.diff_tables(
        a, b.split("#")[1], KEY, partition_by="at", project=root, measures=["amount"]
    )
    want = backfill.diff(_whole(a), _whole(b), KEY, partition_by="at", measures=["amount"])
    assert got.summary == want.summary and got.summary.changed > 0
    assert got.partitions.to_pylist() == want.partitions.to_pylist()  # amount's sums too
    assert _without_types(got.columns.to_pylist()) == _without_types(want.columns.to_pylist())
    streamed = [q for q in queries if q.startswith("SELECT t.`region`")]  # rows, not aggregates
    assert len(got.streamed) > 4
    assert len(streamed) == math.ceil(len(got.streamed) / 2)


def test_types_held_differently_are_reported_per_column(wh: Warehouses) -> None:
    """Spark's TIMESTAMP (an instant) against DuckDB's naive TIMESTAMP compares as instants; a
    decimal against a double as floats; a string against a number is not compared: each is a
    ColumnTypes entry, and equal values are not reported as changed."""
    spark_cols = {
        "id": (Encoding.EXACT, pa.int64(), "BIGINT", "bigint", "bigint"),
        "at": (Encoding.TIMESTAMP, pa.timestamp("us", tz="UTC"), "", "", "timestamp"),
        "v": (Encoding.EXACT, pa.decimal128(18, 2), "", "", "decimal(18,2)"),
        "code": (Encoding.STRING, pa.string(), "", "", "string"),
    }
    duck_cols = {
        "id": (Encoding.EXACT, pa.int64(), "BIGINT", "bigint", "bigint"),
        "at": (Encoding.TIMESTAMP, pa.timestamp("us"), "TIMESTAMP", "", ""),
        "v": (Encoding.FLOAT, pa.float64(), "DOUBLE", "", ""),
        "code": (Encoding.EXACT, pa.int64(), "BIGINT", "", ""),
    }
    rows = [
        {"id": i, "at": DAY0 + dt.timedelta(hours=5 * i), "v": Decimal(i) / 4, "code": str(i)}
        for i in range(20)
    ]
    naive = [
        {**r, "at": r["at"].replace(tzinfo=None), "v": float(r["v"]), "code": i}
        for i, r in enumerate(rows)
    ]
    a = wh.load("spark", rows, spark_cols)
    b = wh.load("duckdb", naive, duck_cols)
    got = backfill.diff_tables(a, b, "id", partition_by="at")
    reported = {c.column: (c.type_a, c.type_b, c.compared_as) for c in got.column_types}
    assert reported == {
        "at": ("timestamp", "TIMESTAMP", "timestamp"),
        "v": ("decimal(18,2)", "DOUBLE", "float"),
        "code": ("string", "BIGINT", None),
    }
    assert got.summary.changed == 0 and got.summary.matched == 20 and got.streamed == []
    naive[3]["v"] += 0.5
    changed = backfill.diff_tables(a, wh.load("duckdb", naive, duck_cols), "id", partition_by="at")
    assert changed.summary.changed == 1 and changed.changed_columns() == {"v": 1}


def test_every_query_reads_the_snapshot_pinned_at_open(wh: Warehouses) -> None:
    old, _ = _tables(5, 60)
    location = wh.load("spark", old)
    with open_table(location) as source:
        pinned = source.snapshot
        before = _segments(source)
        table = location.split("#")[1]
        wh.spark.sql(  # a commit after the table was opened
            f"DELETE FROM {wh.engine.table(table.split('.')[1], 'x')} WHERE id < 30"
        )
        assert _segments(source) == before == _expected(old)
        assert source.rows(f"SELECT count(*) FROM {source.relation} t") == [(len(old),)]
    with open_table(location) as source:
        assert source.snapshot != pinned
        assert sum(fp.rows for fp in _segments(source).values()) == len(
            [r for r in old if r["id"] >= 30]
        )
    snapshot_id = int(pinned.split()[2])
    current = wh.engine.snapshot_of(wh.engine.table(table.split(".")[1], "x"))
    assert current is not None and current != snapshot_id


def test_bad_spark_sides_are_named(wh: Warehouses, tmp_path: Path) -> None:
    old, _ = _tables(6, 20)
    a = wh.load("duckdb", old)
    with pytest.raises(NotFoundError, match=r"no such table x\.nope"):
        backfill.diff_tables(a, f"iceberg://{wh.iceberg}#x.nope", KEY)
    with pytest.raises(InvalidInputError, match="no Iceberg warehouse folder"):
        backfill.diff_tables(a, f"iceberg://{tmp_path}/none#x.t", KEY)
    with pytest.raises(InvalidInputError, match=r"expected iceberg:///warehouse#schema\.table"):
        backfill.diff_tables(a, f"iceberg://{wh.iceberg}", KEY)
    b = wh.load("spark", old)
    with pytest.raises(InvalidInputError, match=r"iceberg://.*nope_column"):
        backfill.diff_tables(b, a, KEY, where="nope_column > 1")


# -- a project's model as a side -------------------------------------------------------------------
EVENTS = """{{ config(event_time="ts") }}
select ts, v, tag from {{ source("raw", "events") }} where ts >= {{ start }} and ts < {{ end }}
"""


def _spark_project(root: Path, catalog: str = "iceberg", extra: str = "") -> Path:
    (root / "models").mkdir(parents=True)
    (root / "models" / "events_clean.sql").write_text(EVENTS)
    (root / "backfill.yml").write_text(
        "name: t\n"
        + spark_support.engine_yaml(catalog=catalog)
        + extra
        + "sources:\n  raw:\n    events: {grain: day, event_time: ts}\n"
        "models:\n  defaults: {grain: day, begin: '2026-08-01', strategy: replace}\n"
    )
    return root


def test_a_spark_projects_model_is_a_side(wh: Warehouses, tmp_path: Path) -> None:
    """``diff_tables("events_clean", <DuckDB copy>, project=...)``: the project's engine (Spark on
    its own Iceberg catalog) opens the model's published table; ``backfill diff --project``
    names it the same way (in this process: the CLI's main, one SparkSession)."""
    from backfill.cli import main
    from backfill.engines import PUBLISHED

    root = _spark_project(tmp_path / "p")
    project = backfill.Project.load(root)
    engine: Any = backfill.engines.registry.engine_for(project)
    days = [dt.datetime(2026, 8, d, tzinfo=UTC) for d in (1, 2, 3)]
    data = pa.table(
        {
            "ts": pa.array([d + dt.timedelta(hours=h) for d in days for h in (1, 2)]),
            "v": pa.array(
                [Decimal(d.day * 10 + h) for d in days for h in (1, 2)], pa.decimal128(9, 1)
            ),
            "tag": ["é", None] * 3,
        }
    )
    engine.load_table("events", data, event_time="ts")
    for d in days:
        engine.run_task(project, "events_clean", d, d + dt.timedelta(days=1), PUBLISHED)
    copy = tmp_path / "copy.duckdb"
    con = duckdb.connect(str(copy))
    con.register("incoming", data)
    con.execute("CREATE TABLE main.events AS SELECT ts, v, tag FROM incoming")
    con.execute("UPDATE main.events SET v = v + 1 WHERE ts = TIMESTAMPTZ '2026-08-02 02:00:00+00'")
    con.close()
    other = f"duckdb://{copy}#main.events"
    got = backfill.diff_tables("events_clean", other, "ts", partition_by="ts", project=root)
    assert got.streamed == ["2026-08-02"] and got.summary.changed == 1
    assert got.snapshots["a"].startswith("Iceberg snapshot ")
    assert str(engine.snapshot_of(engine.table("events_clean"))) in got.snapshots["a"]
    same = backfill.diff_tables("events_clean", "main.events_clean", "ts", project=project)
    assert same.identical
    with pytest.raises(InvalidInputError, match="expected a model of project 't'"):
        backfill.diff_tables("nope", other, "ts", project=root)
    argv = ["diff", "events_clean", other, "--key", "ts", "--partition-by", "ts", "--json"]
    assert main([*argv, "--project", str(root)]) == 1


def test_the_bench_gives_the_same_result_both_ways(wh: Warehouses, tmp_path: Path) -> None:
    """benchmarks/crossdiff_spark_bench.py (small) in the session's Spark: diff_tables and the
    whole tables' diff agree; only the changed day is streamed."""
    import crossdiff_spark_bench as bench

    result = bench.measure(tmp_path, 20_000, 12, 1, wh.engine)
    print("\n".join(result.lines()))
    assert (
        result.same
        and result.streamed == ["2024-03-11"]
        and result.changed == len(range(10, 20_000, 60))
    )
