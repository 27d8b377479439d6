"""backfill.diff_tables sums the measures in each engine: its per-column and per-partition sums,
deltas and percentages equal backfill.diff's over the same rows read whole into Arrow, exact for
integers (also past int64) and decimals (scales 2, 4 and 10, PostgreSQL's unconstrained numeric),
floats up to the order of addition, for streamed and equal partitions alike: DuckDB against
PostgreSQL, Parquet against DuckDB, partitioned or as one segment."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import backfill
from backfill.engines.locations import open_table
from backfill.errors import InvalidInputError
from diff_oracles import assert_same_diff_tables

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 3, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("sold_at", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(18, 2)),
        ("big", pa.decimal128(38, 4)),
        ("huge", pa.int64()),
        ("x", pa.float64()),
        ("u", pa.decimal128(38, 10)),
    ]
)
DUCKDB_TYPES = (
    "id BIGINT, sold_at TIMESTAMPTZ, amount DECIMAL(18,2), big DECIMAL(38,4), huge BIGINT, "
    "x DOUBLE, u DECIMAL(38,10)"
)
PG_TYPES = (
    "id bigint, sold_at timestamptz, amount numeric(18,2), big numeric(38,4), huge bigint, "
    "x double precision, u numeric"
)
EXACT = ["amount", "big", "huge", "u"]


def _rows(seed: int, n: int = 300) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(old, new) over 8 days (some rows without a time): new changes measures in days 1 and 4,
    drops day 6, adds rows to day 2. ``huge`` values near 2^61 make every day's sum leave int64;
    ``big`` values of 26 digits; ``u`` with 10 decimals."""
    rng = random.Random(seed)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    old = [
        {
            "id": i,
            "sold_at": maybe(DAY0 + dt.timedelta(seconds=rng.randrange(8 * 86400))),
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
        day = None if r["sold_at"] is None else (r["sold_at"] - DAY0).days
        if day == 6:
            continue
        if day in (1, 4) and r["id"] % 3 == 0:
            r = {**r, "amount": (r["amount"] or 0) + Decimal("0.01"), "huge": 2**61, "x": 0.5}
        new.append(r)
    day2 = DAY0 + dt.timedelta(days=2)
    new += [
        {**old[0], "id": n + i, "sold_at": day2 + dt.timedelta(hours=i), "u": Decimal("1E-10")}
        for i in range(4)
    ]
    return old, new


def _arrow(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _duckdb(path: Path, rows: list[dict[str, Any]]) -> str:
    con = duckdb.connect(str(path))
    con.register("incoming", _arrow(rows))
    con.execute(f"CREATE TABLE main.sales ({DUCKDB_TYPES})")
    con.execute("INSERT INTO main.sales SELECT * FROM incoming")
    con.close()
    return f"duckdb://{path}#main.sales"


def _postgres(url: str, rows: list[dict[str, Any]]) -> str:
    name = f"m_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE public.{name} ({PG_TYPES})")
        with conn.cursor().copy(f"COPY public.{name} FROM STDIN") as copy:
            for r in rows:
                copy.write_row(tuple(r[c] for c in SCHEMA.names))
    return f"{url}#public.{name}"


def _parquet(path: Path, rows: list[dict[str, Any]]) -> str:
    pq.write_table(_arrow(rows), path)
    return str(path)


def _whole(location: str) -> pa.Table:
    """The rows as Arrow, read whole (the oracle's input), with one spelling of UTC."""
    with open_table(location) as src:
        table = src.arrow(f"SELECT * FROM {src.relation}")
    return table.cast(table.schema.set(1, pa.field("sold_at", pa.timestamp("us", tz="UTC"))))


@pytest.fixture(scope="module")
def pg_url(pg_server: Any) -> str:
    return str(pg_server.create_database("xdiff_sums"))


def _check(a: str, b: str, measures: list[str] | None, **options: Any) -> Any:
    got = backfill.diff_tables(a, b, "id", measures=measures, **options)
    want = backfill.diff(_whole(a), _whole(b), "id", measures=measures, **options)
    assert got.summary == want.summary
    assert got.measures == want.measures
    assert_same_diff_tables(got, want, floats=("x",))
    # each measure's totals at its own type (the per-column table shares one between measures)
    shared = {r["column"]: r for r in want.columns.to_pylist()}
    for m, (old, new) in got.measure_totals.items():
        if m in EXACT:
            assert isinstance(old, int if m == "huge" else Decimal)
        if isinstance(shared[m]["sum_old"], Decimal):  # exact when every measure is
            assert old == shared[m]["sum_old"] and new == shared[m]["sum_new"]
        else:
            assert float(old) == pytest.approx(shared[m]["sum_old"], rel=1e-9)
    return got


@pytest.mark.parametrize("measures", [None, EXACT], ids=["all", "exact"])
def test_duckdb_against_postgres_sums_as_the_arrow_diff(
    tmp_path: Path, pg_url: str, measures: list[str] | None
) -> None:
    old, new = _rows(1)
    a, b = _duckdb(tmp_path / "a.duckdb", old), _postgres(pg_url, new)
    got = _check(a, b, measures, partition_by="sold_at", grain="day")
    # days 1, 2, 4 and 6 streamed; the others (and the rows without a time) summed in the engines
    assert got.streamed == ["2024-03-02", "2024-03-03", "2024-03-05", "2024-03-07"]
    unstreamed = {p["partition"] for p in got.partitions.to_pylist()} - set(got.streamed)
    assert unstreamed == {"2024-03-01", "2024-03-04", "2024-03-06", "2024-03-08", None}
    types = got.partitions.types
    assert types["huge_old"] == "decimal128(38, 0)" and types["u_old"] == "decimal128(38, 10)"
    if measures == EXACT:  # the shared sum column: decimals at the largest scale
        assert got.columns.types["sum_old"] == "decimal128(38, 10)"
    # each engine's own sums of the streamed partitions are the C++ diff's
    for p in got.partitions.to_pylist():
        label = p["partition"] if p["partition"] is not None else "null"
        sums_a, sums_b = got.segment_sums[label]
        for m in EXACT:
            assert sums_a[m] == p[f"{m}_old"] and sums_b[m] == p[f"{m}_new"], (label, m)
    # the same rows on both sides: nothing streamed, every sum from the engines
    same = _check(a, _postgres(pg_url, old), measures, partition_by="sold_at", grain="day")
    assert same.streamed == [] and same.identical


def test_parquet_against_duckdb_partitioned_and_whole(tmp_path: Path) -> None:
    old, new = _rows(2)
    a = _parquet(tmp_path / "old.parquet", old)
    b = _duckdb(tmp_path / "b.duckdb", new)
    _check(a, b, None, partition_by="sold_at", grain="week", tz="Europe/Berlin")
    assert _check(a, b, None).streamed == ["all"]
    same = _duckdb(tmp_path / "same.duckdb", old)
    whole = _check(a, same, None)
    assert whole.streamed == [] and whole.identical
    assert {r["column"]: r["sum_old"] for r in whole.columns.to_pylist()}["huge"] == pytest.approx(
        sum(r["huge"] or 0 for r in old)
    )
    exact = _check(a, same, EXACT)
    totals = {r["column"]: r for r in exact.columns.to_pylist()}
    assert totals["huge"]["sum_old"] == sum(r["huge"] or 0 for r in old)  # past int64, exact
    assert totals["u"]["sum_new"] == sum(r["u"] or 0 for r in old) and totals["u"]["delta"] == 0


def test_a_sum_beyond_38_digits_is_the_diffs_error(tmp_path: Path, pg_url: str) -> None:
    rows = [{"id": i, "sold_at": DAY0, "big": Decimal(9 * 10**33)} for i in range(20)]
    for r in rows:
        r.update(amount=None, huge=None, x=None, u=None)
    a = _duckdb(tmp_path / "a.duckdb", rows)
    b = _postgres(pg_url, rows)
    with pytest.raises(InvalidInputError, match="does not fit in 38") as arrow_error:
        backfill.diff(_whole(a), _whole(b), "id", measures=["big"])
    # PostgreSQL sums it in numeric (no limit): the same error as the diff's
    with pytest.raises(InvalidInputError) as pg_error:
        backfill.diff_tables(b, b, "id", measures=["big"])
    assert str(pg_error.value) == str(arrow_error.value)
    # DuckDB's DECIMAL(38) sum stops itself: its error, naming the side and the measures
    with pytest.raises(InvalidInputError, match=r"a\.duckdb.*Overflow.*measures big"):
        backfill.diff_tables(a, b, "id", measures=["big"])
    assert backfill.diff_tables(a, b, "id", measures=[]).identical
