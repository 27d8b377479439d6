"""backfill.diff_tables with a naive timestamp (or a date) as partition_by in a zone other than
UTC: the C++ diff reads such a value as the wall clock in ``tz``, so the segment scans must put
each row in the partition of that local time, not of its UTC digits. Rows near local midnight
and around both DST changes of America/New_York, in DuckDB, PostgreSQL and Parquet: the result
equals backfill.diff of the same rows, and only the partitions that changed are streamed."""

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
from hypothesis import given, settings
from hypothesis import strategies as st

import backfill
from backfill.audit.diff import diff
from backfill.audit.local_time import column_bounds, column_instant
from backfill.calendar import partition_of, partitions
from backfill.engines import ColumnKind

TZ = "America/New_York"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("at", pa.timestamp("us")),  # naive: wall-clock time in TZ
        ("day", pa.date32()),
        ("amount", pa.decimal128(18, 2)),
    ]
)
# Local days (each with rows in its first and last hours): 2024-03-10 skips 02:00-03:00,
# 2024-11-03 shows 01:00-02:00 twice.
DAYS = [dt.date(2024, 3, d) for d in range(8, 13)] + [dt.date(2024, 11, d) for d in (2, 3, 4)]


def _rows(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[str]]:
    """(old, new, the local days new changes): rows in each day's first five and last two
    hours (the hours whose UTC date is another day), 02:30 on the day it does not exist and
    01:30 on the day it exists twice; new changes an amount in one day's early hours, drops a
    row late in another, adds one early in a third."""
    rng = random.Random(seed)
    old: list[dict[str, Any]] = []
    for day in DAYS:
        midnight = dt.datetime.combine(day, dt.time())
        hours = [0, 1, 2, 3, 4, 22, 23]
        for h in hours * 3:
            at = midnight + dt.timedelta(hours=h, seconds=rng.randrange(3600))
            old.append({"at": at})
    old += [{"at": dt.datetime(2024, 3, 10, 2, 30)}, {"at": dt.datetime(2024, 11, 3, 1, 30)}]
    for i, r in enumerate(old):
        r.update(id=i, day=r["at"].date(), amount=Decimal(rng.randrange(10**6)).scaleb(-2))
    new = [dict(r) for r in old]
    early = next(r for r in new if r["at"].date() == DAYS[1] and r["at"].hour < 5)
    early["amount"] += 1
    late = next(r for r in new if r["at"].date() == DAYS[3] and r["at"].hour >= 22)
    new.remove(late)
    added = dt.datetime.combine(DAYS[6], dt.time(0, 20))  # 2024-11-03, before the fall-back
    new.append({"id": len(old), "at": added, "day": added.date(), "amount": Decimal("1.25")})
    return old, new, {DAYS[1].isoformat(), DAYS[3].isoformat(), DAYS[6].isoformat()}


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _duckdb(path: Path, rows: list[dict[str, Any]]) -> str:
    con = duckdb.connect(str(path))
    con.register("incoming", _table(rows))
    con.execute("CREATE TABLE main.events AS SELECT * FROM incoming")
    con.close()
    return f"duckdb://{path}#main.events"


def _postgres(url: str, rows: list[dict[str, Any]]) -> str:
    name = f"events_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE public.{name} (id bigint PRIMARY KEY, at timestamp, day date, "
            "amount numeric(18,2))"
        )
        with conn.cursor().copy(f"COPY public.{name} (id, at, day, amount) FROM STDIN") as copy:
            for r in rows:
                copy.write_row([r["id"], r["at"], r["day"], r["amount"]])
    return f"{url}#public.{name}"


def _parquet(path: Path, rows: list[dict[str, Any]]) -> str:
    pq.write_table(_table(rows), path)
    return str(path)


@pytest.fixture(scope="module")
def pg_url(pg_server: Any) -> str:
    return str(pg_server.create_database("xnaive"))


@pytest.mark.parametrize(
    ("pair", "column", "threshold"),
    [
        (("duckdb", "postgres"), "at", 16384),
        (("parquet", "duckdb"), "at", 16384),
        (("postgres", "parquet"), "at", 4),  # bisected by key ranges inside the local days
        (("duckdb", "postgres"), "day", 16384),
    ],
)
def test_local_days_of_a_naive_column_are_the_diffs(
    tmp_path: Path, pg_url: str, pair: tuple[str, str], column: str, threshold: int
) -> None:
    old, new, changed = _rows(7)
    make = {
        "duckdb": lambda rows, n: _duckdb(tmp_path / f"{n}.duckdb", rows),
        "postgres": lambda rows, _: _postgres(pg_url, rows),
        "parquet": lambda rows, n: _parquet(tmp_path / f"{n}.parquet", rows),
    }
    a, b = make[pair[0]](old, "a"), make[pair[1]](new, "b")
    options: dict[str, Any] = {"partition_by": column, "grain": "day", "tz": TZ}
    got = backfill.diff_tables(a, b, "id", bisection_threshold=threshold, **options)
    want = backfill.diff(_table(old), _table(new), "id", **options)
    assert got.summary == want.summary
    assert got.partitions.to_pylist() == want.partitions.to_pylist()
    assert got.columns.to_pylist() == want.columns.to_pylist()
    assert got.changed_sample.to_pylist() == want.changed_sample.to_pylist()
    # The fingerprints found the local days that changed, and only those.
    assert set(got.streamed) == changed
    assert sorted(got.segments) == [d.isoformat() for d in DAYS]


def test_naive_hours_across_both_dst_changes(tmp_path: Path, pg_url: str) -> None:
    """At hour grain the skipped hour's wall times fall into the hour before it and the
    repeated hour's into its first occurrence, as the diff reads them; every hour's
    fingerprint is equal for the same rows."""
    old, new, _ = _rows(8)
    a, b = _duckdb(tmp_path / "a.duckdb", old), _postgres(pg_url, new)
    options: dict[str, Any] = {"partition_by": "at", "grain": "hour", "tz": TZ}
    got = backfill.diff_tables(a, b, "id", **options)
    want = backfill.diff(_table(old), _table(new), "id", **options)
    assert got.summary == want.summary
    assert got.partitions.to_pylist() == want.partitions.to_pylist()
    assert len(got.streamed) == 3
    same = backfill.diff_tables(a, _postgres(pg_url, old), "id", **options)
    assert same.identical and same.streamed == []
    by_label = {r["partition"]: r["rows_old"] for r in same.partitions.to_pylist()}
    assert by_label == {
        r["partition"]: r["rows_old"]
        for r in backfill.diff(_table(old), _table(old), "id", **options).partitions.to_pylist()
    }


# Zones with DST at odd hours, half-hour shifts, skipped midnights, and none. (The diff's
# reading of a skipped span is not one interval per partition in a few historical zones, left
# out: see backfill.audit.local_time.)
ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "America/Santiago",
    "America/Sao_Paulo",
    "Australia/Lord_Howe",
    "America/Havana",
    "Asia/Tehran",
    "Africa/Casablanca",
    "Asia/Kolkata",
]


@settings(max_examples=40, deadline=None)
@given(
    tz=st.sampled_from(ZONES),
    year=st.integers(1985, 2030),
    month=st.sampled_from([3, 4, 9, 10, 11]),  # months with DST changes, north and south
    grain=st.sampled_from(["hour", "day", "week"]),
    date_column=st.booleans(),
    seconds=st.lists(st.integers(0, 45 * 86400), min_size=1, max_size=400),
)
def test_bounds_place_every_value_where_the_diff_does(
    tz: str, year: int, month: int, grain: str, date_column: bool, seconds: list[int]
) -> None:
    """The oracle is the C++ diff's own per-partition row counts for the same values."""
    if date_column and grain == "hour":
        grain = "day"
    start = dt.datetime(year, month, 1) - dt.timedelta(days=10)
    values: list[Any] = [start + dt.timedelta(seconds=s) for s in seconds]
    if date_column:
        values = [v.date() for v in values]
    typ = pa.date32() if date_column else pa.timestamp("us")
    table = pa.table({"id": range(len(values)), "at": pa.array(values, typ)})
    options: dict[str, Any] = {"partition_by": "at", "grain": grain, "tz": tz, "measures": []}
    want = {
        r["partition"]: r["rows_old"]
        for r in diff(table, table, "id", **options).partitions.to_pylist()
    }
    instants = [column_instant(v, tz) for v in values]
    first = partition_of(min(instants), grain, tz)
    last = partition_of(max(instants), grain, tz)
    parts = [(p.label, p.start, p.end) for p in partitions(grain, first.start, last.end, tz)]
    kind = ColumnKind.DATE if date_column else ColumnKind.TIMESTAMP
    bounds = column_bounds(parts, kind, tz)
    got: dict[str, int] = {}
    for v in values:
        naive = v if isinstance(v, dt.datetime) else dt.datetime.combine(v, dt.time())
        at = naive.replace(tzinfo=dt.timezone.utc)  # as the SQL literals compare it
        (label,) = [lb for lb, s, e in bounds if s <= at < e]
        got[label] = got.get(label, 0) + 1
    assert got == want
