"""Declaratively partitioned tables on PostgreSQL (a model's ``table_partitions``): the setting and
its refusals, the partitions tasks make (calendar bounds in the model's time zone, DST, date,
timestamp and timestamptz columns, concurrent tasks making one partition), per-partition
statistics, publish by partition exchange (no validation scan, no row copied), and the rollback
by the reverse exchange. Oracles: zoneinfo for the bounds, the rows read back before and after,
the catalog (which relation holds which rows) and the server's own DEBUG1 messages."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import threading
import time
import zoneinfo
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
from backfill.engines import PUBLISHED, Area, TaskFailure
from backfill.engines.postgres import PostgresEngine
from backfill.model.files import ProjectError
from pg_engine_support import ensure_entry_point, subprocess_env
from shop_support import cli

UTC = dt.timezone.utc
AS_OF = "2027-01-01"


@pytest.fixture(autouse=True)
def _entry_point() -> None:
    ensure_entry_point()


def _rows(url: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        conn.execute("SET TimeZone TO 'UTC'")
        return conn.execute(sql, params).fetchall()


def _project(root: Path, url: str, models: dict[str, tuple[str, str]], tz: str = "UTC") -> Path:
    """A project over ``raw.events (id, at timestamptz, at_local timestamp, v)`` whose models
    are name -> (yml config, SQL)."""
    (root / "models").mkdir(parents=True, exist_ok=True)
    for name, (_, sql) in models.items():
        (root / "models" / f"{name}.sql").write_text(sql + "\n", encoding="utf-8")
    configs = "\n".join(f"  {name}: {cfg}" for name, (cfg, _) in models.items())
    (root / "backfill.yml").write_text(
        f"""name: parts
engine: {{type: postgres, url: "{url}", schema: pub}}
state: .backfill
sources:
  raw:
    events: {{grain: hour, tz: UTC, event_time: at}}
models:
  defaults: {{grain: day, tz: {tz}, begin: "2026-01-01"}}
{configs}
""",
        encoding="utf-8",
    )
    return root


EVENTS = """{{ config(event_time="at") }}
select id, at, v from {{ source("raw", "events") }} e
where at >= {{ start }} and at < {{ end }}"""


def _events(url: str, start: str, end: str, step: str = "1 hour") -> None:
    """``raw.events``: one row per ``step`` in [start, end) (UTC), v = id / 4."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET TimeZone TO 'UTC'")
        conn.execute(
            "CREATE SCHEMA IF NOT EXISTS raw; CREATE TABLE IF NOT EXISTS raw.events "
            "(id bigint, at timestamptz, v numeric(12, 2))"
        )
        conn.execute(
            "INSERT INTO raw.events SELECT row_number() OVER () + coalesce((SELECT max(id) "
            "FROM raw.events), 0), g, 0 FROM generate_series(%s::timestamptz, "
            "%s::timestamptz - interval '1 microsecond', %s::interval) g",
            [start, end, step],
        )
        conn.execute("UPDATE raw.events SET v = id / 4.0")


def _partitions(url: str, table: str) -> list[tuple[str, str, bool]]:
    """(name, bound, has the bound CHECK) of each partition of ``table``, by bound."""
    return [
        (str(name), str(bound), bool(check))
        for name, bound, check in _rows(
            url,
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), EXISTS (SELECT 1 FROM "
            "pg_constraint k WHERE k.conrelid = c.oid AND k.conname = "
            "'backfill_partition_bound') FROM pg_inherits i JOIN pg_class c ON "
            "c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s) ORDER BY 2",
            [table],
        )
    ]


def _build(root: Path, start: str, end: str) -> backfill.Project:
    project = backfill.Project.load(root)
    plan = project.plan("*", start, end, as_of=AS_OF, partitions_per_run=1)
    status = project.backfill(plan, reason="build", direct=True).run(concurrency=3, backoff=0.0)
    assert status.ok, str(status)
    return project


# -- the setting ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("engine", "config", "message"),
    [
        ("postgres", "{table_partitions: fortnight}", "'fortnight' is not a grain"),
        ("postgres", "{table_partitions: hour}", "table_partitions 'hour' does not hold whole day"),
        ("postgres", "{grain: week, table_partitions: month}", "does not hold whole week"),
        (
            "postgres",
            "{strategy: merge, unique_key: id, table_partitions: month}",
            "table_partitions needs strategy 'replace', not 'merge'",
        ),
        ("postgres", "{grain: null, strategy: full, table_partitions: day}", "needs a partitioned"),
        ("postgres", "{table_partitions: true}", "table_partitions True is not a grain"),
        ("duckdb", "{table_partitions: month}", "this project's engine is duckdb"),
    ],
)
def test_bad_table_partitions_are_refused_naming_the_value(
    tmp_path: Path, engine: str, config: str, message: str
) -> None:
    _project(tmp_path, "postgresql://u@h/db", {"ev": (config, EVENTS)})
    if engine == "duckdb":
        yml = tmp_path / "backfill.yml"
        yml.write_text(
            re.sub(r"engine: .*", "engine: {type: duckdb}", yml.read_text(encoding="utf-8"))
        )
    with pytest.raises(ProjectError, match=re.escape(message)) as err:
        backfill.Project.load(tmp_path)
    assert "'ev'" in str(err.value)


def test_an_engine_without_partitioned_tables_fails_the_task_naming_the_setting(
    tmp_path: Path,
) -> None:
    project = backfill.Project("p")
    project.source("raw.events", grain="day", event_time="at")
    project.model(
        "ev",
        depends_on=["raw.events"],
        grain="day",
        event_time="at",
        table_partitions="month",
        sql="select 1 as id, {{ start }} as at",
    )
    from backfill.engines.duckdb import DuckDBEngine

    engine = DuckDBEngine(tmp_path / "w.duckdb")
    try:
        s = dt.datetime(2026, 1, 1, tzinfo=UTC)
        with pytest.raises(TaskFailure, match="table_partitions 'month' needs an engine") as err:
            engine.run_task(project, "ev", s, s + dt.timedelta(days=1), PUBLISHED)
        assert not err.value.transient
    finally:
        engine.close()


# -- making the table and its partitions ----------------------------------------------------------
NAIVE = """{{ config(event_time="at_utc") }}
select id, at at time zone 'UTC' as at_utc, v from {{ source("raw", "events") }} e
where at >= {{ start }} and at < {{ end }}"""
DAILY = """{{ config(event_time="day") }}
select cast(at at time zone '%s' as date) as day, count(*) as n, sum(v) as v
from {{ source("raw", "events") }} e where at >= {{ start }} and at < {{ end }} group by 1"""


def test_tasks_make_one_partition_per_period_with_its_bound_as_a_check(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.create_database("parts_made")
    _events(url, "2026-01-01", "2026-03-10", "7 hours")
    models = {
        "ev": ("{table_partitions: month}", EVENTS),
        "ev_naive": ("{table_partitions: month}", NAIVE),
        "ev_daily": ("{table_partitions: month}", DAILY % "UTC"),
    }
    _build(_project(tmp_path, url, models), "2026-01-01", "2026-03-10")
    months = [("2026-01-01", "2026-02-01"), ("2026-02-01", "2026-03-01")]
    months.append(("2026-03-01", "2026-04-01"))
    shapes = {"ev": "{} 00:00:00+00", "ev_naive": "{} 00:00:00", "ev_daily": "{}"}
    for table, shape in shapes.items():
        kind = "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)"
        assert _rows(url, kind, [f"pub.{table}"]) == [("p",)]
        expected = [
            (
                f"{table}__{lo[:7].replace('-', '_')}",
                f"FOR VALUES FROM ('{shape.format(lo)}') TO ('{shape.format(hi)}')",
                True,
            )
            for lo, hi in months
        ]
        assert _partitions(url, f"pub.{table}") == expected
    raw = _rows(url, "SELECT count(*), sum(v) FROM raw.events")[0]
    assert _rows(url, "SELECT count(*), sum(v) FROM pub.ev")[0] == raw
    assert _rows(url, "SELECT count(*), sum(v) FROM pub.ev_naive")[0] == raw
    assert _rows(url, "SELECT sum(n), sum(v) FROM pub.ev_daily")[0] == raw
    # each row in the partition of its month (the oracle: the month of its UTC time)
    assert _rows(
        url,
        "SELECT count(*) FROM pub.ev e JOIN pg_class c ON c.oid = e.tableoid "
        "WHERE c.relname <> 'ev__' || to_char(e.at, 'YYYY_MM')",
    ) == [(0,)]


def _local_midnights(tz: str, first: dt.date, days: int) -> list[dt.datetime]:
    zone = zoneinfo.ZoneInfo(tz)
    return [
        dt.datetime.combine(first + dt.timedelta(days=k), dt.time(), zone).astimezone(UTC)
        for k in range(days + 1)
    ]


DST_SPANS = {  # (first day, days) around both changes of the clocks in 2026
    "Europe/Berlin": [(dt.date(2026, 3, 27), 4), (dt.date(2026, 10, 23), 5)],
    # the clocks change at midnight: 5 Sep has no 00:00, 4 Apr 23:00-24:00 happens twice
    "America/Santiago": [(dt.date(2026, 4, 3), 3), (dt.date(2026, 9, 5), 3)],
}


@pytest.mark.parametrize("tz", sorted(DST_SPANS))
def test_partitions_follow_the_calendar_of_the_models_zone_across_dst(
    tmp_path: Path, pg_server: Any, tz: str
) -> None:
    """Hourly models in a zone with DST, partitioned by day: a partition is a local day (23 or
    25 hours where the clocks change), for instants, UTC wall times and local dates alike."""
    url = pg_server.create_database("parts_dst")
    spans = DST_SPANS[tz]
    hourly = "{grain: hour, begin: '2026-01-01', table_partitions: day}"
    models = {
        "ev": (hourly, EVENTS),
        "ev_naive": (hourly, NAIVE),
    }
    if tz == "Europe/Berlin":  # a date is in a period when its midnight UTC is: east of UTC
        models["ev_daily"] = ("{table_partitions: day}", DAILY % tz)
    root = _project(tmp_path, url, models, tz=tz)
    for first, days in spans:
        lo, hi = _local_midnights(tz, first, days)[0], _local_midnights(tz, first, days)[-1]
        _events(url, lo.isoformat(), hi.isoformat(), "20 minutes")
        _build(root, lo.isoformat(), hi.isoformat())
    bounds = {
        "ev": lambda t: t.strftime("%Y-%m-%d %H:%M:%S+00"),
        "ev_naive": lambda t: t.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for table, shape in bounds.items():
        expected = [
            f"FOR VALUES FROM ('{shape(a)}') TO ('{shape(b)}')"
            for first, days in spans
            for a, b in itertools.pairwise(_local_midnights(tz, first, days))
        ]
        assert [b for _, b, _ in _partitions(url, f"pub.{table}")] == expected
        lengths = {
            (b - a).total_seconds() / 3600
            for first, days in spans
            for a, b in itertools.pairwise(_local_midnights(tz, first, days))
        }
        assert lengths == {23.0, 24.0, 25.0}  # the spans hold both changes of the clocks
    days = (
        []
        if tz != "Europe/Berlin"
        else [
            f"FOR VALUES FROM ('{first + dt.timedelta(days=k)}') TO "
            f"('{first + dt.timedelta(days=k + 1)}')"
            for first, n in spans
            for k in range(n)
        ]
    )
    assert [b for _, b, _ in _partitions(url, "pub.ev_daily")] == days
    # every row sits in the partition of its local day, and none is lost
    zone = zoneinfo.ZoneInfo(tz)
    placed = _rows(
        url,
        "SELECT c.relname, e.at FROM pub.ev e JOIN pg_class c ON c.oid = e.tableoid",
    )
    assert all(name == f"ev__{at.astimezone(zone):%Y_%m_%d}" for name, at in placed), placed[:3]
    assert len(placed) == _rows(url, "SELECT count(*) FROM raw.events")[0][0]
    if days:
        assert _rows(url, "SELECT sum(n) FROM pub.ev_daily") == _rows(
            url, "SELECT count(*) FROM raw.events"
        )


def test_hours_cannot_cut_a_date_column(tmp_path: Path, pg_server: Any) -> None:
    url = pg_server.create_database("parts_date_hours")
    _events(url, "2026-01-01", "2026-01-02")
    daily = DAILY % "UTC"
    _project(tmp_path, url, {"ev_daily": ("{grain: hour, table_partitions: hour}", daily)})
    project = backfill.Project.load(tmp_path)
    engine = backfill.engines.registry.engine_for(project)
    try:
        s = dt.datetime(2026, 1, 1, tzinfo=UTC)  # the hour of the day's midnight
        with pytest.raises(TaskFailure, match="holds no whole value of it") as err:
            engine.run_task(project, "ev_daily", s, s + dt.timedelta(hours=1), PUBLISHED)
        assert not err.value.transient
        assert "'day'" in str(err.value) and "day or coarser" in str(err.value)
        assert _rows(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'pub'") == [(0,)]
    finally:
        engine.close()


def _waiting_on_advisory_locks(url: str) -> int:
    return int(
        _rows(url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0][
            0
        ]
    )


def test_two_tasks_making_one_partition_take_turns_and_both_land(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.create_database("parts_race")
    _events(url, "2026-01-01", "2026-03-01", "3 hours")
    project = _build(
        _project(tmp_path, url, {"ev": ("{table_partitions: month}", EVENTS)}),
        "2026-01-01",
        "2026-01-03",
    )
    engine = PostgresEngine(url, schema="pub", pool_size=4)
    key = "backfill:pub.ev@partition 2026-02"
    errors: list[BaseException] = []

    def task(d: int) -> None:
        s = dt.datetime(2026, 2, d, tzinfo=UTC)
        try:
            engine.run_task(project, "ev", s, s + dt.timedelta(days=1), PUBLISHED)
        except BaseException as exc:
            errors.append(exc)

    try:
        with psycopg.connect(url, autocommit=True) as holder:
            # Both tasks find February missing and wait for the lock that orders its makers.
            holder.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", [key])
            threads = [threading.Thread(target=task, args=(d,)) for d in (3, 4)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while _waiting_on_advisory_locks(url) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _waiting_on_advisory_locks(url) == 2
            holder.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [key])
            for t in threads:
                t.join()
        assert not errors, errors
        assert [name for name, _, _ in _partitions(url, "pub.ev")] == ["ev__2026_01", "ev__2026_02"]
        assert _rows(
            url,
            "SELECT count(*), sum(v) FROM raw.events "
            "WHERE at >= '2026-02-03' AND at < '2026-02-05'",
        ) == _rows(url, "SELECT count(*), sum(v) FROM pub.ev__2026_02")
    finally:
        engine.close()


def test_concurrent_first_tasks_make_the_table_and_its_partitions_once(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.create_database("parts_first")
    _events(url, "2026-01-25", "2026-02-05", "2 hours")
    project = backfill.Project.load(
        _project(tmp_path, url, {"ev": ("{table_partitions: month}", EVENTS)})
    )
    engine = PostgresEngine(url, schema="pub", pool_size=8)
    days = [dt.datetime(2026, 1, 28, tzinfo=UTC) + dt.timedelta(days=k) for k in range(6)]
    area = Area("bf_first", {"ev": [(days[0], days[-1] + dt.timedelta(days=1))]})
    errors: list[BaseException] = []
    start = threading.Barrier(len(days) * 2)

    def task(s: dt.datetime) -> None:
        start.wait()
        try:
            engine.run_task(project, "ev", s, s + dt.timedelta(days=1), area)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=task, args=(s,)) for s in days * 2]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert [b for _, b, _ in _partitions(url, "audit_bf_first.ev")] == [
            "FOR VALUES FROM ('2026-01-01 00:00:00+00') TO ('2026-02-01 00:00:00+00')",
            "FOR VALUES FROM ('2026-02-01 00:00:00+00') TO ('2026-03-01 00:00:00+00')",
        ]
        assert _rows(url, "SELECT count(*), sum(v) FROM audit_bf_first.ev") == _rows(
            url,
            "SELECT count(*), sum(v) FROM raw.events "
            "WHERE at >= '2026-01-28' AND at < '2026-02-03'",
        )
    finally:
        engine.drop_area("bf_first")
        engine.close()


def _analyzed(url: str, table: str) -> int:
    found = _rows(
        url,
        "SELECT analyze_count FROM pg_stat_user_tables WHERE schemaname = 'pub' AND relname = %s",
        [table],
    )
    return int(found[0][0]) if found else 0


def test_a_task_analyzes_the_partitions_it_wrote_and_no_other(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.create_database("parts_stats")
    _events(url, "2026-01-01", "2026-04-01", "10 minutes")
    project = _build(
        _project(tmp_path, url, {"ev": ("{table_partitions: month}", EVENTS)}),
        "2026-01-01",
        "2026-03-01",
    )
    before = {m: _analyzed(url, f"ev__2026_{m:02}") for m in (1, 2)}
    assert all(before.values())  # each month analyzed as its days arrived
    engine = PostgresEngine(url, schema="pub")
    try:
        s = dt.datetime(2026, 3, 2, tzinfo=UTC)
        engine.run_task(project, "ev", s, s + dt.timedelta(days=1), PUBLISHED)
    finally:
        engine.close()
    assert _analyzed(url, "ev__2026_03") == 1  # new: its statistics, before the next task
    assert {m: _analyzed(url, f"ev__2026_{m:02}") for m in (1, 2)} == before
    stats = _rows(
        url,
        "SELECT tablename, count(*) FROM pg_stats WHERE schemaname = 'pub' GROUP BY 1 ORDER BY 1",
    )
    assert [t for t, _ in stats] == ["ev__2026_01", "ev__2026_02", "ev__2026_03"]
    # the planner now expects the day's rows in March (144), not a default guess
    with psycopg.connect(url) as conn:
        plan = conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT * FROM pub.ev WHERE at >= '2026-03-02' AND "
            "at < '2026-03-03'"
        ).fetchone()
    assert plan is not None
    assert 100 <= plan[0][0]["Plan"]["Plan Rows"] <= 200


# -- publish by exchange, rollback by the reverse exchange ----------------------------------------
def _oids(url: str, schema: str) -> dict[str, int]:
    """name -> oid of the tables of ``schema``."""
    return {
        str(n): int(o)
        for n, o in _rows(
            url,
            "SELECT c.relname, c.oid FROM pg_class c JOIN pg_namespace s ON s.oid = "
            "c.relnamespace WHERE s.nspname = %s AND c.relkind IN ('r', 'p')",
            [schema],
        )
    }


def _published(url: str) -> list[tuple[Any, ...]]:
    return _rows(url, "SELECT id, at, v FROM pub.ev ORDER BY id")


def _oracle(url: str, start: str, end: str) -> list[tuple[Any, ...]]:
    return _rows(
        url,
        "SELECT id, at, v FROM raw.events WHERE at >= %s AND at < %s ORDER BY id",
        [start, end],
    )


@pytest.fixture()
def months(tmp_path: Path, pg_server: Any) -> tuple[backfill.Project, str]:
    """``ev`` (daily, partitioned by month) built over January to 10 March, then February and
    5 March corrected in the raw data."""
    url = pg_server.create_database("parts_publish")
    with psycopg.connect(url, autocommit=True) as conn:  # the exchanges' proof, in the log
        conn.execute(f'ALTER DATABASE "{url.rsplit("/", 1)[1]}" SET log_min_messages = debug1')
    _events(url, "2026-01-01", "2026-03-10", "2 hours")
    project = _build(
        _project(tmp_path, url, {"ev": ("{table_partitions: month}", EVENTS)}),
        "2026-01-01",
        "2026-03-10",
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET TimeZone TO 'UTC'")
        conn.execute(
            "UPDATE raw.events SET v = v + 1 WHERE (at >= '2026-02-01' AND at < '2026-03-01') "
            "OR (at >= '2026-03-05' AND at < '2026-03-06')"
        )
    return project, url


def test_publish_exchanges_whole_partitions_and_copies_smaller_periods(
    months: tuple[backfill.Project, str], pg_server: Any
) -> None:
    from backfill.run.ledger import ledger_for

    project, url = months
    built = _published(url)
    plan = project.plan("ev", "2026-02-01", "2026-03-10", as_of=AS_OF)
    bf = project.backfill(plan, reason="February and 5 March corrected")
    assert bf.run(concurrency=3, backoff=0.0).ok
    bf.audit()
    old, new = _oids(url, "pub"), _oids(url, f"audit_{bf.id}")
    log_before = len(pg_server.log())
    pub = bf.publish("February and 5 March corrected")
    assert _published(url) == _oracle(url, "2026-01-01", "2026-03-10")
    now, kept = _oids(url, "pub"), _oids(url, f"backup_{pub.id}")
    # February: the area's table is the published partition now (no row copied), and the
    # partition it replaced is kept whole, attached to the backup's partitioned table.
    assert now["ev__2026_02"] == new["ev__2026_02"] != old["ev__2026_02"]
    assert kept["ev__2026_02"] == old["ev__2026_02"]
    assert _partitions(url, f"backup_{pub.id}.ev") == [
        (
            "ev__2026_02",
            "FOR VALUES FROM ('2026-02-01 00:00:00+00') TO ('2026-03-01 00:00:00+00')",
            True,
        ),
        (
            "ev__2026_03",
            "FOR VALUES FROM ('2026-03-01 00:00:00+00') TO ('2026-04-01 00:00:00+00')",
            True,
        ),
    ]
    # March, smaller periods: the changed day's rows copied in place, the partition stays.
    assert now["ev__2026_03"] == old["ev__2026_03"] and now["ev__2026_01"] == old["ev__2026_01"]
    backed = _rows(url, f'SELECT id, at, v FROM "backup_{pub.id}".ev ORDER BY id')
    assert backed == [
        r
        for r in built
        if dt.datetime(2026, 2, 1, tzinfo=UTC) <= r[1] < dt.datetime(2026, 3, 1, tzinfo=UTC)
        or dt.datetime(2026, 3, 5, tzinfo=UTC) <= r[1] < dt.datetime(2026, 3, 6, tzinfo=UTC)
    ]
    km = ledger_for(project).kept_version(pub.id).models[0]
    assert [label for label, _, _ in km.parts] == [
        *(f"2026-02-{d:02}" for d in range(1, 29)),
        "2026-03-05",
    ]
    assert km.unchanged == tuple(f"2026-03-{d:02}" for d in (1, 2, 3, 4, 6, 7, 8, 9))
    assert km.rows == len(backed) == bf.engine.backup_rows(pub.id)
    # ATTACH found each partition's CHECK equal to its bound: no validation scan.
    log = pg_server.log()[log_before:]
    assert 'partition constraint for table "ev__2026_02" is implied by existing constraints' in log
    assert not re.search(r'verifying table "ev__', log)


def test_rollback_is_the_reverse_exchange_and_puts_back_exactly_the_rows(
    months: tuple[backfill.Project, str],
) -> None:
    project, url = months
    built, old = _published(url), _oids(url, "pub")
    plan = project.plan("ev", "2026-02-01", "2026-03-10", as_of=AS_OF)
    bf = project.backfill(plan, reason="corrected")
    assert bf.run(concurrency=3, backoff=0.0).ok
    bf.audit()
    pub = bf.publish("corrected")
    fixed, new = _published(url), _oids(url, "pub")
    rb = project.rollback(pub.id, note="taken back")
    assert _published(url) == built
    back = _oids(url, "pub")
    assert back["ev__2026_02"] == old["ev__2026_02"]  # the kept partition itself, attached
    assert _oids(url, f"backup_{rb.id}")["ev__2026_02"] == new["ev__2026_02"]
    assert back["ev__2026_03"] == old["ev__2026_03"]
    assert rb.models["ev"] == [*(f"2026-02-{d:02}" for d in range(1, 29)), "2026-03-05"]
    again = project.rollback(rb.id, note="right after all")
    assert _published(url) == fixed
    assert _oids(url, "pub")["ev__2026_02"] == new["ev__2026_02"]
    project.rollback(again.id, note="taken back again")
    assert _published(url) == built
    # every partition still carries its bound, and no table was left behind unattached
    assert all(check for _, _, check in _partitions(url, "pub.ev"))
    tables = {t for t in _oids(url, "pub") if not t.startswith("backfill_")}
    assert tables == {"ev", "ev__2026_01", "ev__2026_02", "ev__2026_03"}


def test_a_plain_table_is_left_alone_until_it_is_partitioned_on_request(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.create_database("parts_migrate")
    _events(url, "2026-01-01", "2026-03-10", "5 hours")
    root = _project(tmp_path, url, {"ev": ("{tags: [x]}", EVENTS)})
    _build(root, "2026-01-01", "2026-03-10")
    yml = root / "backfill.yml"
    yml.write_text(yml.read_text().replace("{tags: [x]}", "{tags: [x], table_partitions: month}"))
    kind = "SELECT relkind FROM pg_class WHERE oid = to_regclass('pub.ev')"
    # Written and published by DELETE + INSERT as before (the audit area's table is
    # partitioned: it is new).
    project = backfill.Project.load(root)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE raw.events SET v = v + 1 WHERE at >= '2026-02-03' AND at < '2026-02-05'"
        )
    plan = project.plan("ev", "2026-02-01", "2026-02-10", as_of=AS_OF)
    bf = project.backfill(plan, reason="fix")
    assert bf.run(concurrency=2, backoff=0.0).ok
    bf.audit()
    pub = bf.publish("fix")
    assert _rows(url, kind) == [("r",)]
    assert _published(url) == _oracle(url, "2026-01-01", "2026-03-10")
    project.rollback(pub.id, note="back")
    before = _published(url)
    engine = backfill.engines.registry.engine_for(project)
    try:
        with psycopg.connect(url, autocommit=True) as conn:  # a row without its event time
            conn.execute("INSERT INTO pub.ev VALUES (-1, NULL, 0)")
        with pytest.raises(backfill.InvalidInputError, match=r"1 row\(s\) of .* have no at"):
            engine.partition_table(project, "ev")
        assert _rows(url, kind) == [("r",)]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM pub.ev WHERE id = -1")
        assert engine.partition_table(project, "ev") == 3
    finally:
        engine.close()
    again = cli("partition", "ev", "--project", str(root), "--json", env=subprocess_env())
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["partitions_made"] == 0  # partitioned already
    assert _rows(url, kind) == [("p",)]
    assert [n for n, _, check in _partitions(url, "pub.ev") if check] == [
        "ev__2026_01",
        "ev__2026_02",
        "ev__2026_03",
    ]
    assert _published(url) == before
    # from now on publish exchanges its partitions
    bf = project.backfill(project.plan("ev", "2026-02-01", "2026-03-01", as_of=AS_OF), reason="x")
    assert bf.run(concurrency=2, backoff=0.0).ok
    bf.audit()
    area = _oids(url, f"audit_{bf.id}")
    bf.publish("fix again")
    assert _oids(url, "pub")["ev__2026_02"] == area["ev__2026_02"]
    assert _published(url) == _oracle(url, "2026-01-01", "2026-03-10")


def test_a_reader_of_two_exchanged_tables_does_not_deadlock_with_the_publish(
    tmp_path: Path, pg_server: Any
) -> None:
    """A reader's transaction holds one table, the publish locks the other and waits for the
    first, then the reader asks for the other: a deadlock, which the publish breaks by letting
    go of its try before PostgreSQL's deadlock check would abort either side."""
    url = pg_server.create_database("parts_deadlock")
    _events(url, "2026-01-01", "2026-03-01", "4 hours")
    models = dict.fromkeys(("ev", "ev_b"), ("{table_partitions: month}", EVENTS))
    project = _build(_project(tmp_path, url, models), "2026-01-01", "2026-03-01")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE raw.events SET v = v + 1 WHERE at >= '2026-02-01'")
    bf = project.backfill(project.plan("*", "2026-02-01", "2026-03-01", as_of=AS_OF), reason="x")
    assert bf.run(concurrency=2, backoff=0.0).ok
    bf.audit()
    outcome: list[BaseException | str] = []

    def publish() -> None:
        try:
            bf.publish("both")
            outcome.append("published")
        except BaseException as exc:
            outcome.append(exc)

    def waiting_for(table: str) -> bool:
        return bool(
            _rows(
                url,
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = to_regclass(%s)",
                [table],
            )[0][0]
        )

    with psycopg.connect(url) as reader:  # a transaction: its locks stay until it ends
        reader.execute("SELECT count(*) FROM pub.ev_b").fetchone()
        thread = threading.Thread(target=publish)
        thread.start()
        deadline = time.monotonic() + 30
        while not waiting_for("pub.ev_b") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert waiting_for("pub.ev_b")  # the publish holds pub.ev and waits for pub.ev_b
        # The reader now asks for pub.ev: it waits until the publish lets go of its try.
        assert reader.execute("SELECT count(*) FROM pub.ev").fetchone() == (
            _rows(url, "SELECT count(*) FROM raw.events")[0][0],
        )
        reader.commit()
    thread.join(60)
    assert outcome == ["published"]
    assert _rows(url, "SELECT id, at, v FROM pub.ev_b ORDER BY id") == _oracle(
        url, "2026-01-01", "2026-03-01"
    )


def test_partition_table_on_an_engine_without_partitioned_tables_is_a_usage_error(
    tmp_path: Path,
) -> None:
    from backfill.engines.duckdb import DuckDBEngine

    project = backfill.Project("p")
    project.source("raw.events", grain="day", event_time="at")
    project.model("ev", depends_on=["raw.events"], grain="day", event_time="at", sql="select 1")
    engine = DuckDBEngine(tmp_path / "w.duckdb")
    try:
        with pytest.raises(
            backfill.InvalidInputError, match=r"an engine with partitioned tables .*this is duckdb"
        ):
            engine.partition_table(project, "ev")
    finally:
        engine.close()
    sql = '{{ config(event_time="ts") }}\nselect 1 as id, {{ start }} as ts'
    _project(tmp_path / "p", "postgresql://u@h/db", {"ev": ("{tags: [x]}", sql)})
    yml = tmp_path / "p" / "backfill.yml"
    yml.write_text(re.sub(r"engine: .*", "engine: {type: duckdb}", yml.read_text()))
    r = cli("partition", "ev", "--project", str(tmp_path / "p"))
    assert r.returncode == 2
    assert "partition_table needs table_partitions on the model" in r.stderr


def test_a_first_publish_attaches_the_areas_partitions_and_its_rollback_drops_the_table(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.create_database("parts_first_publish")
    _events(url, "2026-01-20", "2026-02-10", "3 hours")
    project = backfill.Project.load(
        _project(tmp_path, url, {"ev": ("{table_partitions: month}", EVENTS)})
    )
    plan = project.plan("ev", "2026-01-01", "2026-02-10", as_of=AS_OF)
    bf = project.backfill(plan, reason="first build, audited")
    assert bf.run(concurrency=3, backoff=0.0).ok
    bf.audit()
    area = _oids(url, f"audit_{bf.id}")
    pub = bf.publish("first build")
    assert _rows(url, "SELECT relkind FROM pg_class WHERE oid = to_regclass('pub.ev')") == [("p",)]
    now = _oids(url, "pub")
    assert now["ev__2026_01"] == area["ev__2026_01"]  # January: exchanged (attached)
    assert now["ev__2026_02"] != area.get("ev__2026_02")  # February: 1-9 copied in
    assert _published(url) == _oracle(url, "2026-01-01", "2026-02-10")
    project.rollback(pub.id, note="not yet")
    assert _rows(url, "SELECT to_regclass('pub.ev')") == [(None,)]
