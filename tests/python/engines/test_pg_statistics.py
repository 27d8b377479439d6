"""Planner statistics on PostgreSQL: a task reads what an earlier task wrote only once the
planner's statistics describe it. A backfill writes whole new periods in bulk; with the
statistics of an earlier task the planner estimates 1 row for them and joins the next model's
inputs by a nested loop of sequential scans (minutes a task instead of a fraction of a second).
Everything runs against the session's throwaway server (``pg_server``)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
from backfill.engines.sql.core import audit_schema
from pg_engine_support import ensure_entry_point

AS_OF = "2026-06-01"
FIRST, END = "2026-01-01", "2026-03-02"  # 60 days, 12 tasks of 5 days per model
PER_DAY = 160  # one every 9 minutes

YML = """\
name: stats
engine: {{type: postgres, url: "{url}", schema: pub}}
state: .backfill
sources:
  raw:
    events: {{grain: day, tz: UTC, event_time: at}}
models:
  defaults: {{grain: day, tz: UTC, begin: "2026-01-01"}}
"""
# The last bound of ``up``'s histogram of ``at`` (in ``schemas``) when the task of ``down``
# ran: below 30,000 rows ANALYZE samples every row, so it is the latest ``at`` the planner
# knows of. Every day of ``down`` records it beside the latest ``at`` it read.
DOWN = """\
select cast(u.at as date) as day, max(u.at) as last_at, count(*) as n,
    (select max((s.histogram_bounds::text::timestamp[])[
        array_length(s.histogram_bounds::text::timestamp[], 1)])
     from pg_stats s
     where s.tablename = 'up' and s.attname = 'at' and s.schemaname {schemas}) as known_to
from {{{{ ref("up") }}}} u
where u.at >= {{{{ start }}}} and u.at < {{{{ end }}}}
group by 1
"""
UP = """\
select id, at, v from {{ source("raw", "events") }}
where at >= {{ start }} and at < {{ end }}
"""


@pytest.fixture(autouse=True)
def _entry_point() -> None:
    ensure_entry_point()


def _project(root: Path, url: str, schemas: str) -> backfill.Project:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "backfill.yml").write_text(
        YML.format(url=url) + "  up: {event_time: at}\n  down: {event_time: day}\n",
        encoding="utf-8",
    )
    (root / "models" / "up.sql").write_text(UP, encoding="utf-8")
    (root / "models" / "down.sql").write_text(DOWN.format(schemas=schemas), encoding="utf-8")
    return backfill.Project.load(root)


def _events(url: str) -> None:
    """PER_DAY rows a day, each at its own minute (a histogram, not most common values)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA raw")
        conn.execute(
            "CREATE TABLE raw.events AS SELECT i AS id, TIMESTAMP '2026-01-01' + "
            f"(i * interval '{24 * 60 // PER_DAY} minutes') AS at, i % 7 AS v "
            f"FROM generate_series(0, {60 * PER_DAY - 1}) AS i"
        )
        conn.execute("ANALYZE raw.events")


def _down(url: str, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            f"SELECT day, last_at, n, known_to FROM {schema}.down ORDER BY day"
        ).fetchall()


@pytest.mark.parametrize("direct", [True, False], ids=["initial build", "audit area"])
def test_a_task_reads_only_what_the_planner_statistics_describe(
    pg_server: Any, tmp_path: Path, direct: bool
) -> None:
    """Tasks of ``down`` read 5 days of ``up`` each, written by ``up``'s tasks in any order at
    concurrency 4 (a few at once, each a new period past the statistics before it): when each
    ran, ``up``'s statistics already covered every row it read. In the audit area ``up`` is the
    backfill's new table (the published one covers every day already)."""
    url = pg_server.create_database("stats")
    _events(url)
    schemas = "= 'pub'" if direct else "LIKE 'audit%'"
    project = _project(tmp_path, url, schemas)
    if not direct:  # the published tables first; then the backfill of every day
        plan = project.plan("*", FIRST, END, as_of=AS_OF, partitions_per_run=60)
        assert project.backfill(plan, reason="build", direct=True).run(concurrency=1).ok
    plan = project.plan("*", FIRST, END, as_of=AS_OF, partitions_per_run=5)
    bf = project.backfill(plan, reason="stats", direct=direct)
    assert bf.run(concurrency=4, backoff=0.0).ok
    schema = "pub" if direct else audit_schema(str(bf.area.backfill_id))
    rows = _down(url, schema)
    assert len(rows) == 60 and all(n == PER_DAY for _, _, n, _ in rows)
    stale = [(d, last, known) for d, last, _, known in rows if known is None or known < last]
    assert not stale, f"days read before the statistics knew their rows: {stale}"
    # and what the planner now expects of a late period is what is there
    with psycopg.connect(url) as conn:
        plan_json = conn.execute(
            f"EXPLAIN (FORMAT JSON) SELECT * FROM {schema}.up "
            "WHERE at >= '2026-02-25' AND at < '2026-03-02'"
        ).fetchone()
    assert plan_json is not None
    assert plan_json[0][0]["Plan"]["Plan Rows"] >= 5 * PER_DAY / 2


def test_the_shop_builds_without_nested_loops_over_stale_statistics(
    pg_server: Any, tmp_path: Path
) -> None:
    """The shop's initial build (README: 11 monthly tasks a model) one task at a time. With the
    statistics of earlier months, fct_daily_sales's task for November joined its order lines to
    clean_orders by a nested loop (a sequential scan of clean_orders per line) and ran past the
    bound below; with fresh statistics each of its tasks takes a fraction of a second. The bound
    is a statement_timeout (a permanent failure: the run stops at once, naming the task) of
    15 s, tens of times a task's time, so load on a shared machine does not trip it."""
    from backfill.examples.shop import postgres as shop_pg

    url = pg_server.create_database("shop_stats")
    database = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {database} SET statement_timeout = '15s'")
    root = shop_pg.create(tmp_path / "shop", url, orders_per_day=150)
    project = backfill.Project.load(root)
    plan = project.plan("*", "2026-01-01", "2026-12-01", as_of="2026-12-01", partitions_per_run=31)
    began = time.perf_counter()
    status = project.backfill(plan, reason="initial build", direct=True).run(concurrency=1)
    seconds = time.perf_counter() - began
    assert status.ok, str(status)
    assert seconds < 60, f"the initial build took {seconds:.1f} s"
    with psycopg.connect(url) as conn:
        days = conn.execute("SELECT count(*), max(sales_date) FROM public.fct_daily_sales")
        assert days.fetchone() == (334, dt.date(2026, 11, 30))


def test_tasks_that_commit_together_share_one_analyze(pg_server: Any, tmp_path: Path) -> None:
    """Two tasks of one table whose commits both came before either refreshed the statistics:
    the first ANALYZE counts the rows of both, so the second task, which waited its turn, finds
    the planner's estimate right and does not analyze again (each reads most of the table)."""
    from backfill.engines.registry import engine_for

    url = pg_server.create_database("turns")
    _events(url)
    project = _project(tmp_path, url, "= 'pub'")
    plan = project.plan("up", FIRST, "2026-01-11", as_of=AS_OF, partitions_per_run=10)
    assert project.backfill(plan, reason="first", direct=True).run(concurrency=1).ok
    with psycopg.connect(url, autocommit=True) as conn:  # two new periods, both committed
        # Autovacuum may analyze the new rows before the tasks look (it did once, in a full
        # run under load: then neither task needed to): only the tasks may here.
        conn.execute("ALTER TABLE pub.up SET (autovacuum_enabled = off)")
        conn.execute(
            "INSERT INTO pub.up SELECT * FROM raw.events WHERE at >= '2026-01-11' "
            "AND at < '2026-01-21'"
        )

    def analyzed() -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'pub.up'::regclass"
            ).fetchone()
        return int(row[0]) if row else 0

    engine = engine_for(project)
    before = analyzed()
    periods = [("2026-01-11", "2026-01-16"), ("2026-01-16", "2026-01-21")]
    rel = engine.published(project, "up")
    turn = engine._statistics_turn(engine.dialect.qualified(rel), False)
    try:
        with turn:  # both tasks plan only once it is their turn
            threads = [
                threading.Thread(
                    target=_refresh, args=(engine, rel, s, e, 5 * PER_DAY), daemon=True
                )
                for s, e in periods
            ]
            for t in threads:
                t.start()
            time.sleep(0.5)
        for t in threads:
            t.join(60)
    finally:
        engine.close()
    assert analyzed() == before + 1


def _refresh(engine: Any, rel: tuple[str, str], start: str, end: str, rows: int) -> None:
    utc = dt.timezone.utc
    bounds = (dt.datetime.fromisoformat(start).replace(tzinfo=utc), dt.datetime.fromisoformat(end))
    held = engine.dialect.in_periods("at", [(bounds[0], bounds[1].replace(tzinfo=utc))])
    with engine.connect() as cur:
        engine._fresh_statistics(cur, rel, held, rows)
