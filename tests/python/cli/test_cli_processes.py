"""The ``backfill`` console script as users run it: each test runs the installed script
(``<venv>/bin/backfill``, beside ``sys.executable``) in a fresh process -- its own interpreter,
no ``PYTHONPATH``, a working directory outside the repository -- against the real servers the
suite starts, and checks its exit code, what it prints and the state it leaves (warehouse rows,
consumer group offsets, ledger rows, received webhooks, e-mails and lineage events).

Why: every Kafka command failed with confluent-kafka 2.16 (``module 'confluent_kafka' has no
attribute 'admin'``) while the tests passed, because they called the CLI in-process after the
test module had imported ``confluent_kafka.admin`` itself. Nothing of the test process leaks into
these runs; the test process only prepares inputs (project files, topic records, data) and reads
the results.

The commands and the outside systems each talks to (``backfill --help``, backfill/cli/*.py), and
the test here that runs each against them (DuckDB alone is no outside system: a file):

  command             outside systems                                 run here by
  partitions          none (calendar arithmetic)                      -
  lint                none (reads SQL files)                          -
  plan                Kafka (offsets of a replayed topic); dbt        test_kafka_plan_*,
                      (parses the project)                            test_dbt_*
  run                 the engine: PostgreSQL, Spark, dbt; Kafka       test_kafka_run_*,
                      (landing); the ledger: SQLite, PostgreSQL       test_postgres_*, test_spark_*,
                                                                      test_dbt_*, test_notify_*
  status              the ledger (SQLite, PostgreSQL)                 test_kafka_run_*,
                                                                      test_postgres_*
  pause, resume       the ledger; Airflow tasks read the hold there   test_postgres_*;
                                                                      Airflow: below
  cancel              the ledger (Airflow tasks skip)                 Airflow: below
  estimate, check     the engine (runs into scratch schemas)          test_postgres_*
  audit               the engine, the ledger                          test_postgres_*, test_spark_*,
                                                                      test_dbt_*, test_notify_*
  publish             the engine, the ledger, webhooks, SMTP,         test_postgres_*, test_spark_*,
                      OpenLineage                                     test_dbt_*, test_notify_*
  discard             the engine, the ledger                          test_postgres_*
  changelog           the engine (its changelog table)                test_kafka_reset_*,
                                                                      test_postgres_*, test_dbt_*,
                                                                      test_notify_*
  forward             the engine, webhooks, SMTP, OpenLineage         test_notify_*
  diff                DuckDB only (files, or a DuckDB warehouse);     test_postgres_* (the refusal)
                      refuses other warehouses
  replay reset-group  Kafka (group offsets), the ledger, the engine   test_kafka_reset_*
  demo                PostgreSQL (--url), Spark                       PostgreSQL: test_pg_engine
                                                                      (python -m backfill.cli);
                                                                      Spark: only in-process
                                                                      (test_spark_demo)

Airflow has no command: the integration is a Python API (``backfill_dag`` in
backfill.integrations.airflow) that Airflow imports. What the CLI does to an Airflow run --
``backfill pause`` / ``cancel`` from another process while the DAG runs, read by its mapped tasks
from the ledger -- is run by test_airflow.py's DAG file through this same console script
(airflow_support.DAG_FILE, ``_backfill_cli``).

The servers are the session fixtures of conftest.py, shared with the other tests: the
``kafka_broker``, ``built_spark_shop`` and ``built_dbt_shop`` tests run in one xdist group each
(conftest's _GROUPS), so each is made once per run; ``pg_server`` / ``built_pg_shop`` and
``built_shop`` once per worker that needs them.
"""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml  # type: ignore[import-untyped]

from backfill.examples import shop
from notify_support import Mailbox, Receiver
from shop_support import AS_OF, copy_built

#: the installed console script (``[project.scripts] backfill``) of this interpreter's venv
BACKFILL = Path(sys.executable).parent / "backfill"

REASON = "discount bug fixed"
NOTE = "Revenue from 1 Aug was overstated by about 2%."


def backfill_cli(
    *args: str, cwd: Path, expect: int = 0, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``backfill ARGS`` through the console script in a fresh process (no PYTHONPATH, working
    directory ``cwd``); asserts its exit code and that it printed no traceback."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ.update(env or {})
    r = subprocess.run(
        [str(BACKFILL), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=environ,
        check=False,
    )
    shown = (
        f"backfill {' '.join(args)} exited {r.returncode} (expected {expect})\n"
        f"--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}"
    )
    assert r.returncode == expect, shown
    assert "Traceback" not in r.stderr, shown
    return r


def test_the_console_script_is_installed_beside_the_interpreter(tmp_path: Path) -> None:
    r = backfill_cli("--help", cwd=tmp_path)
    for command in (
        "plan",
        "run",
        "status",
        "audit",
        "publish",
        "changelog",
        "forward",
        "replay",
        "demo",
    ):
        assert f"    {command} " in r.stdout, r.stdout


def fixed_revenue_sql(start: str, end: str, raw: str = "raw") -> str:
    """Per day of [start, end): the revenue the fixed fct_daily_sales must hold, straight from
    the raw tables (no models, no refs). Portable SQL: DuckDB, PostgreSQL and Spark."""
    return f"""
        SELECT cast(o.ordered_at AS DATE) AS d,
               cast(sum(i.quantity * i.unit_price * (1 - coalesce(i.discount,
                    i.discount_pct * 0.01, 0))) AS DECIMAL(18, 2)) AS revenue
        FROM {raw}.orders o JOIN {raw}.order_items i ON o.order_id = i.order_id
        WHERE lower(o.status) = 'completed' AND i.quantity > 0
          AND o.ordered_at >= TIMESTAMP '{start} 00:00:00'
          AND o.ordered_at < TIMESTAMP '{end} 00:00:00'
        GROUP BY 1 ORDER BY 1"""


def duck(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


# -- Kafka ---------------------------------------------------------------------------------------
K_START, K_END = "2026-08-02", "2026-08-05"
LATENESS = dt.timedelta(hours=2)  # backfill.kafka.yml's


def _utc(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc)


def _records(bootstrap: str, topic: str) -> dict[int, list[tuple[int, int]]]:
    """partition -> [(offset, timestamp ms)] of every record of ``topic``, read from the broker
    (the oracle of the offsets the CLI plans and resets to)."""
    import confluent_kafka as ck

    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"oracle-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "log_level": 2,
        }
    )
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {
            p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in parts
        }
        c.assign([ck.TopicPartition(topic, p, 0) for p in parts])
        got: dict[int, list[tuple[int, int]]] = {p: [] for p in parts}
        deadline = time.monotonic() + 60
        while any(len(got[p]) < ends[p] for p in parts) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[int(m.partition() or 0)].append((int(m.offset() or 0), m.timestamp()[1]))
        assert all(len(got[p]) == ends[p] for p in parts), "could not read the whole topic"
        return got
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str, parts: list[int]) -> dict[int, int]:
    import confluent_kafka as ck

    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "log_level": 2,
        }
    )
    try:
        got = c.committed([ck.TopicPartition(topic, p) for p in parts], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commits ``offsets`` for ``group`` without joining it (no member left behind)."""
    import confluent_kafka as ck

    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "log_level": 2,
        }
    )
    try:
        c.commit(
            offsets=[ck.TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        c.close()


@pytest.fixture(scope="module")
def kafka_shop(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The shop with its orders in a topic of the session's broker (produced by the test
    process) and its order items built; the project reads the topic."""
    from backfill.examples.shop import kafka as shop_kafka

    root = shop.create(tmp_path_factory.mktemp("cli_kafka") / "shop", data=False)
    db = root / "warehouse.duckdb"
    shop.generate(db, orders_per_day=30, first=dt.date(2026, 8, 1), last=dt.date(2026, 8, 6))
    topic = f"cli_orders_{uuid.uuid4().hex[:6]}"
    produced = shop_kafka.produce_orders(db, kafka_broker.bootstrap, topic=topic)
    shop_kafka.use_kafka(root, kafka_broker.bootstrap, topic=topic)
    backfill_cli(
        "run",
        "--project",
        str(root),
        "--direct",
        "--select",
        "clean_order_items",
        "--start",
        K_START,
        "--end",
        K_END,
        "--reason",
        "order items",
        "--json",
        cwd=root.parent,
    )
    return {
        "root": root,
        "db": db,
        "topic": topic,
        "produced": produced,
        "bootstrap": kafka_broker.bootstrap,
        "records": _records(kafka_broker.bootstrap, topic),
    }


def test_kafka_plan_reads_the_topics_offsets(kafka_shop: dict[str, Any]) -> None:
    root, topic = kafka_shop["root"], kafka_shop["topic"]
    r = backfill_cli(
        "plan",
        "--project",
        str(root),
        "--select",
        "source:raw.orders+",
        "--start",
        K_START,
        "--end",
        K_END,
        "--json",
        cwd=root.parent,
    )
    doc = json.loads(r.stdout)
    assert [m["model"] for m in doc["models"]][:2] == ["raw_orders", "clean_orders"]
    (check,) = doc["replay"]
    assert check["topic"] == topic and check["model"] == "raw_orders"
    lo = (_utc(K_START) - LATENESS).timestamp() * 1000
    hi = (_utc(K_END) + LATENESS).timestamp() * 1000
    for part in check["partitions"]:
        # From the first record timestamped inside to the log end: a record timestamped inside
        # may come after records of later times.
        records = kafka_shop["records"][part["partition"]]
        inside = [o for o, ts in records if lo <= ts < hi]
        assert (part["from"], part["to"]) == (min(inside), max(o for o, _ in records) + 1), part
    assert sorted(p["partition"] for p in check["partitions"]) == sorted(kafka_shop["records"])
    r = backfill_cli(
        "plan",
        "--project",
        str(root),
        "--select",
        "source:raw.orders+",
        "--start",
        K_START,
        "--end",
        K_END,
        cwd=root.parent,
    )
    assert topic in r.stdout


def test_kafka_run_replays_the_period_into_the_landing_table_and_downstream(
    kafka_shop: dict[str, Any],
) -> None:
    root, db = kafka_shop["root"], kafka_shop["db"]
    r = backfill_cli(
        "run",
        "--project",
        str(root),
        "--direct",
        "--select",
        "source:raw.orders+",
        "--start",
        K_START,
        "--end",
        K_END,
        "--reason",
        "replay orders",
        "--concurrency",
        "2",
        "--no-progress",
        cwd=root.parent,
    )
    assert r.stdout.startswith("plan: ") and "-> published tables" in r.stdout, r.stdout
    cols = "order_id, customer_id, ordered_at, country, status"
    period = f"ordered_at >= DATE '{K_START}' AND ordered_at < DATE '{K_END}'"
    expected = set(duck(db, f"SELECT {cols} FROM raw.orders WHERE {period}"))
    landed = duck(db, f"SELECT {cols} FROM raw_orders")
    assert len(expected) > 50 and kafka_shop["produced"] > len(expected)
    assert len(landed) == len(expected) and set(landed) == expected
    assert duck(db, "SELECT count(*) FROM raw_orders_dead_letter") == [(0,)]
    assert duck(db, "SELECT count(*) FROM clean_orders") == duck(
        db, f"SELECT count(*) FROM raw.orders WHERE {period} AND lower(status) <> 'test'"
    )
    assert duck(db, "SELECT count(*) FROM fct_daily_sales") == [(3,)]

    st = json.loads(
        backfill_cli("status", "--project", str(root), "--json", cwd=root.parent).stdout
    )
    assert st["status"] == "done" and st["selection"] == "source:raw.orders+"
    assert st["tasks"]["total"] == st["tasks"]["done"] > 0
    assert {m["model"] for m in st["models"]} >= {"raw_orders", "clean_orders"}


def test_kafka_reset_group_dry_run_execute_and_undo(kafka_shop: dict[str, Any]) -> None:
    root, topic, bootstrap = kafka_shop["root"], kafka_shop["topic"], kafka_shop["bootstrap"]
    records = kafka_shop["records"]
    parts = sorted(records)
    group = f"cli-etl-{uuid.uuid4().hex[:6]}"
    before = {p: 3 + p for p in parts}
    _commit(bootstrap, group, topic, before)
    assert _committed(bootstrap, group, topic, parts) == before
    args = [
        "replay",
        "reset-group",
        group,
        "--topic",
        topic,
        "--to",
        "2026-08-03",
        "--project",
        str(root),
    ]

    r = backfill_cli(*args, cwd=root.parent)  # a dry run changes nothing
    assert "dry run: nothing changed" in r.stdout
    assert _committed(bootstrap, group, topic, parts) == before

    r = backfill_cli(*args, "--execute", "--json", cwd=root.parent)
    to = _utc("2026-08-03").timestamp() * 1000
    expected = {p: min(o for o, ts in records[p] if ts >= to) for p in parts}
    doc = json.loads(r.stdout)
    assert doc["executed"] and doc["members"] == []
    assert {x["partition"]: (x["current"], x["new"]) for x in doc["partitions"]} == {
        p: (before[p], expected[p]) for p in parts
    }
    assert _committed(bootstrap, group, topic, parts) == expected
    # recorded in the warehouse changelog (model kafka:<topic>, one row per partition)
    log = json.loads(
        backfill_cli(
            "changelog",
            "--project",
            str(root),
            "--model",
            f"kafka:{topic}",
            "--format",
            "json",
            cwd=root.parent,
        ).stdout
    )
    (entry,) = log
    assert entry["reason"] == "reset consumer group offsets"
    assert sorted(entry["models"][f"kafka:{topic}"]["changed_partitions"]) == [
        f"{group}/{p}" for p in parts
    ]

    r = backfill_cli(
        "replay",
        "reset-group",
        group,
        "--topic",
        topic,
        "--undo",
        "--project",
        str(root),
        cwd=root.parent,
    )
    assert "undone: reset_" in r.stdout
    assert _committed(bootstrap, group, topic, parts) == before


# -- PostgreSQL: the warehouse and the ledger ----------------------------------------------------
PG_START, PG_END = "2026-08-01", "2026-08-04"


def _pg(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql, params or None).fetchall()


def test_postgres_warehouse_with_a_postgres_ledger_runs_audits_publishes(
    built_pg_shop: Any, pg_server: Any, tmp_path: Path
) -> None:
    root, url = built_pg_shop.copy(tmp_path / "shop")
    ledger = pg_server.create_database("cli_ledger")
    days = f"sales_date >= DATE '{PG_START}' AND sales_date < DATE '{PG_END}'"
    before = _pg(
        url, f"SELECT sales_date, revenue FROM public.fct_daily_sales WHERE {days} ORDER BY 1"
    )
    shop.fix(root)
    common = ["--project", str(root), "--ledger", ledger]

    # Recorded outside its window: nothing runs, exit 3 (come back later).
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=12)
    closed = f"{later:%H:%M}-{later + dt.timedelta(minutes=1):%H:%M} UTC"
    r = backfill_cli(
        "run",
        "--select",
        "fct_daily_sales+",
        "--start",
        PG_START,
        "--end",
        PG_END,
        "--as-of",
        AS_OF,
        "--reason",
        REASON,
        "--concurrency",
        "2",
        "--window",
        closed,
        "--exit-outside-window",
        "--no-progress",
        *common,
        cwd=tmp_path,
        expect=3,
    )
    bid = r.stdout.split("backfill ", 1)[1].split(":", 1)[0]
    assert bid.startswith("bf_"), r.stdout
    # the ledger is the Postgres database --ledger names, not the project's SQLite file
    assert _pg(ledger, "SELECT id FROM backfill_ledger.backfills") == [(bid,)]
    assert not (root / ".backfill" / "ledger.sqlite").exists()
    done = "SELECT count(*) FROM backfill_ledger.tasks WHERE status = 'done'"
    assert _pg(ledger, done) == [(0,)]
    # Paused from another process: a runner that must not wait exits 3, nothing done.
    r = backfill_cli("pause", bid, *common, cwd=tmp_path)
    assert f"backfill {bid} paused" in r.stdout
    assert _pg(ledger, "SELECT paused_at IS NOT NULL FROM backfill_ledger.backfills")[0][0]
    always = ["--window", "00:00-24:00 UTC"]
    backfill_cli(
        "run",
        "--resume",
        bid,
        *always,
        "--exit-when-held",
        "--no-progress",
        *common,
        cwd=tmp_path,
        expect=3,
    )
    assert _pg(ledger, done) == [(0,)]
    backfill_cli("resume", bid, *common, cwd=tmp_path)
    assert not _pg(ledger, "SELECT paused_at IS NOT NULL FROM backfill_ledger.backfills")[0][0]
    backfill_cli(
        "run",
        "--resume",
        bid,
        *always,
        "--concurrency",
        "2",
        "--no-progress",
        *common,
        cwd=tmp_path,
    )

    st = json.loads(backfill_cli("status", bid, "--json", *common, cwd=tmp_path).stdout)
    assert st["status"] == "done" and st["tasks"]["total"] == st["tasks"]["done"] > 0
    assert _pg(ledger, "SELECT status FROM backfill_ledger.backfills") == [("done",)]
    assert _pg(ledger, done) == [(st["tasks"]["total"],)]
    assert {m["model"] for m in st["models"]} == {
        "fct_daily_sales",
        "fct_monthly_sales",
        "fct_sales_7d",
    }

    audit = json.loads(backfill_cli("audit", bid, "--json", *common, cwd=tmp_path).stdout)
    assert audit["passed"]
    daily = next(m for m in audit["models"] if m["model"] == "fct_daily_sales")
    assert daily["partitions_differing"] == 3 and daily["rows_changed"] == 3
    # nothing published yet: readers of the published table see the old revenue
    assert (
        _pg(url, f"SELECT sales_date, revenue FROM public.fct_daily_sales WHERE {days} ORDER BY 1")
        == before
    )

    pub = json.loads(
        backfill_cli("publish", bid, "--note", NOTE, "--json", *common, cwd=tmp_path).stdout
    )
    assert pub["published"] and pub["backfill_id"] == bid
    after = _pg(
        url, f"SELECT sales_date, revenue FROM public.fct_daily_sales WHERE {days} ORDER BY 1"
    )
    assert after == _pg(url, fixed_revenue_sql(PG_START, PG_END))
    # the bug overstated every day's revenue
    assert all(new < old for (_, new), (_, old) in zip(after, before, strict=True))
    assert _pg(ledger, "SELECT status FROM backfill_ledger.backfills") == [("published",)]
    audit_schemas = "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'audit_%'"
    assert _pg(url, audit_schemas) == [(0,)]

    # estimate and check run into scratch schemas of the warehouse, dropped when they end
    est = json.loads(
        backfill_cli(
            "estimate",
            "--select",
            "fct_daily_sales+",
            "--start",
            PG_START,
            "--end",
            PG_END,
            "--as-of",
            AS_OF,
            "--json",
            "--project",
            str(root),
            cwd=tmp_path,
        ).stdout
    )
    assert {s["model"] for s in est["samples"]} == {
        "fct_daily_sales",
        "fct_monthly_sales",
        "fct_sales_7d",
    }
    assert all(s["rows"] > 0 for s in est["samples"]) and est["makespan_seconds"] > 0
    chk = json.loads(
        backfill_cli(
            "check",
            "fct_daily_sales",
            "--partition",
            "2026-08-02",
            "--json",
            "--project",
            str(root),
            cwd=tmp_path,
        ).stdout
    )
    assert chk["ok"] and chk["deterministic"]
    assert len(set(chk["fingerprints"])) == 1, chk["fingerprints"]
    assert _pg(url, audit_schemas) == [(0,)]
    # discard: another backfill, run into its audit area, dropped unpublished
    r = backfill_cli(
        "run",
        "--select",
        "fct_daily_sales",
        "--start",
        "2026-08-05",
        "--end",
        "2026-08-06",
        "--as-of",
        AS_OF,
        "--reason",
        "to be discarded",
        "--no-progress",
        *common,
        cwd=tmp_path,
    )
    other = r.stdout.split("backfill ", 1)[1].split(":", 1)[0]
    assert _pg(url, audit_schemas) == [(1,)]
    r = backfill_cli("discard", other, *common, cwd=tmp_path)
    assert r.stdout.startswith(f"discarded {other}")
    assert _pg(url, audit_schemas) == [(0,)]
    assert _pg(ledger, "SELECT status FROM backfill_ledger.backfills WHERE id = %s", (other,)) == [
        ("discarded",)
    ]
    assert (
        _pg(url, f"SELECT sales_date, revenue FROM public.fct_daily_sales WHERE {days} ORDER BY 1")
        == after
    )

    r = backfill_cli("status", "--list", *common, cwd=tmp_path)
    assert bid in r.stdout and "published" in r.stdout
    log = json.loads(
        backfill_cli("changelog", "--project", str(root), "--format", "json", cwd=tmp_path).stdout
    )
    assert [(e["publication_id"], e["note"]) for e in log] == [(pub["id"], NOTE)]
    # diff reads schema.table through the project's engine, Postgres too
    r = backfill_cli(
        "diff",
        "public.fct_daily_sales",
        "public.fct_daily_sales",
        "--key",
        "sales_date",
        "--project",
        str(root),
        cwd=tmp_path,
        expect=0,
    )
    assert "identical" in r.stdout, r.stdout


# -- Spark on Iceberg ----------------------------------------------------------------------------
SP_START, SP_END = "2026-08-01", "2026-08-03"


def test_spark_run_audit_publish_each_in_its_own_driver(
    built_spark_shop: Path, tmp_path: Path
) -> None:
    """Each command starts its own Spark driver (local[2]) on the project's Iceberg folder
    catalog; the test's own session only copies the tables in and reads the result."""
    import spark_support

    root = spark_support.copy_tables(built_spark_shop, tmp_path / "shop")
    shop.fix(root)
    common = ["--project", str(root)]
    r = backfill_cli(
        "run",
        "--select",
        "fct_daily_sales",
        "--start",
        SP_START,
        "--end",
        SP_END,
        "--as-of",
        spark_support.AS_OF,
        "--reason",
        REASON,
        "--concurrency",
        "2",
        "--json",
        *common,
        cwd=tmp_path,
        timeout=400,
    )
    run = json.loads(r.stdout)
    assert run["status"] == "done" and run["tasks"] == {"total": 2, "done": 2}
    audit = json.loads(backfill_cli("audit", "--json", *common, cwd=tmp_path, timeout=400).stdout)
    assert audit["passed"]
    (daily,) = audit["models"]
    assert daily["partitions_differing"] == 2 and daily["rows_changed"] == 2
    pub = json.loads(
        backfill_cli("publish", "--note", NOTE, "--json", *common, cwd=tmp_path, timeout=400).stdout
    )
    assert pub["published"] and pub["models"] == {"fct_daily_sales": ["2026-08-01", "2026-08-02"]}

    import backfill

    engine: Any = backfill.engines.registry.engine_for(backfill.Project.load(root))
    spark = engine.spark
    table = engine.table("fct_daily_sales", "main")
    spark.sql(f"REFRESH TABLE {table}")  # another driver committed to it
    got = [
        (r[0], r[1])
        for r in spark.sql(
            f"SELECT sales_date, revenue FROM {table} WHERE sales_date >= DATE '{SP_START}' AND "
            f"sales_date < DATE '{SP_END}' ORDER BY 1"
        ).collect()
    ]
    raw = engine.table("orders", "raw").rsplit(".", 1)[0]  # <catalog>.raw
    want = [(r[0], r[1]) for r in spark.sql(fixed_revenue_sql(SP_START, SP_END, raw)).collect()]
    assert got == want and len(got) == 2
    assert [
        b
        for b in spark.sql(
            f"SELECT name FROM {engine._ns('main')}.fct_daily_sales.refs WHERE type = 'BRANCH'"
        ).collect()
        if b[0] != "main"
    ] == []  # audit branch dropped


# -- dbt -----------------------------------------------------------------------------------------
def test_dbt_run_audit_publish_changelog(built_dbt_shop: Path, tmp_path: Path) -> None:
    from backfill.examples import dbt_shop
    from dbt_support import AS_OF as DBT_AS_OF

    root = tmp_path / "dbt_shop"
    shutil.copytree(
        built_dbt_shop, root, ignore=shutil.ignore_patterns(".backfill", ".test_profiles")
    )
    db = root / "warehouse.duckdb"
    before = duck(db, "SELECT sales_date, revenue FROM main.fct_daily_sales ORDER BY 1")
    dbt_shop.fix(root)
    dbt = ["--dbt", str(root)]
    plan = json.loads(
        backfill_cli(
            "plan",
            *dbt,
            "--select",
            "fct_daily_sales+",
            "--start",
            "2026-08-14",
            "--end",
            "2026-08-16",
            "--propagate",
            "clip",
            "--as-of",
            DBT_AS_OF,
            "--json",
            cwd=tmp_path,
        ).stdout
    )
    assert [(m["model"], m["first"], m["last"]) for m in plan["models"]] == [
        ("fct_daily_sales", "2026-08-14", "2026-08-15"),
        ("fct_sales_7d", "full", "full"),
        ("fct_monthly_sales", "2026-08", "2026-08"),
    ]
    r = backfill_cli(
        "run",
        *dbt,
        "--select",
        "fct_daily_sales",
        "--start",
        "2026-08-14",
        "--end",
        "2026-08-16",
        "--as-of",
        DBT_AS_OF,
        "--reason",
        REASON,
        "--no-progress",
        cwd=tmp_path,
    )
    assert "audit area of bf_" in r.stdout
    audit = json.loads(backfill_cli("audit", *dbt, "--json", cwd=tmp_path).stdout)
    assert audit["passed"]
    (daily,) = audit["models"]
    assert daily["partitions_differing"] == 2
    assert duck(db, "SELECT sales_date, revenue FROM main.fct_daily_sales ORDER BY 1") == before
    r = backfill_cli("publish", *dbt, "--note", NOTE, cwd=tmp_path)
    assert r.stdout.startswith("published bf_")
    after = dict(duck(db, "SELECT sales_date, revenue FROM main.fct_daily_sales ORDER BY 1"))
    fixed = dict(duck(db, fixed_revenue_sql("2026-08-14", "2026-08-16")))
    assert {d: after[d] for d in fixed} == fixed and len(fixed) == 2
    assert {d: v for d, v in after.items() if d not in fixed} == {
        d: v for d, v in before if d not in fixed
    }  # no other day moved
    log = backfill_cli("changelog", *dbt, "--format", "markdown", cwd=tmp_path).stdout
    assert "fct_daily_sales" in log and NOTE in log


# -- consumers: webhooks, e-mail, OpenLineage ----------------------------------------------------
N_START, N_END = "2026-08-01", "2026-08-04"
OWNER = "data-eng@shop.example"


def _tell_consumers(root: Path, web: str, smtp_port: int) -> None:
    """finance (webhook + e-mail) follows the daily and monthly sales; data-eng owns the daily
    sales; OpenLineage events go to a file and to http."""
    yml = root / "backfill.yml"
    doc = yaml.safe_load(yml.read_text())
    doc["notify"] = {
        "smtp": {"host": "127.0.0.1", "port": smtp_port, "from": "backfill@shop.example"},
        "retries": 2,
        "backoff": 0,
        "timeout": 10,
        "consumers": {"finance": {"webhook": f"{web}/finance", "email": "finance@shop.example"}},
    }
    doc["lineage"] = {
        "namespace": "cli-test",
        "transports": [
            {"type": "file", "path": "lineage.jsonl"},
            {"type": "http", "url": web, "endpoint": "api/v1/lineage"},
        ],
    }
    doc["models"]["fct_daily_sales"].update(owners=[OWNER], consumers=["finance"])
    doc["models"]["fct_monthly_sales"].update(consumers=["finance"])
    yml.write_text(yaml.safe_dump(doc, sort_keys=False))


def _mails(box: Mailbox) -> list[Any]:
    return [
        email.message_from_string(data, policy=email.policy.default) for _, _, data in box.messages
    ]


def test_notify_and_lineage_on_publish_and_forward(
    built_shop: Path, tmp_path: Path, web: Receiver, mail: Mailbox
) -> None:
    root = copy_built(built_shop, tmp_path / "shop")
    _tell_consumers(root, web.url, mail.port)
    shop.fix(root)
    common = ["--project", str(root)]
    backfill_cli(
        "run",
        "--select",
        "fct_daily_sales+",
        "--start",
        N_START,
        "--end",
        N_END,
        "--as-of",
        AS_OF,
        "--reason",
        REASON,
        "--json",
        *common,
        cwd=tmp_path,
    )
    assert json.loads(backfill_cli("audit", "--json", *common, cwd=tmp_path).stdout)["passed"]
    assert not web.posts and not mail.messages  # nobody is told before the publish
    r = backfill_cli("publish", "--note", NOTE, "--json", *common, cwd=tmp_path)
    pub = json.loads(r.stdout)
    told = {(d["channel"], d["consumer"]): d["ok"] for d in pub["deliveries"]}
    assert told and all(told.values()), pub["deliveries"]
    assert {c for c, _ in told} == {"webhook", "email", "lineage"}

    # the webhook: one POST for finance's two models, with the reason, the note and the ids
    (body,) = web.bodies("/finance")
    text = body["text"]
    assert (
        text.splitlines()[0]
        == "[shop] fct_daily_sales, fct_monthly_sales: published history changed"
    )
    assert f"Reason: {REASON}" in text and f"Note: {NOTE}" in text
    assert pub["id"] in text and body["backfill"]["publication_id"] == pub["id"]
    assert "fct_sales_7d" not in text
    # e-mail: finance and the daily sales' owner, each once; the subject is the first line
    got = {tuple(to): m for (_, to, _), m in zip(mail.messages, _mails(mail), strict=True)}
    assert set(got) == {("finance@shop.example",), (OWNER,)}
    assert got[("finance@shop.example",)]["Subject"] == text.splitlines()[0]
    assert (
        got[("finance@shop.example",)].get_content().replace("\r\n", "\n").strip() == text.strip()
    )
    # OpenLineage: one COMPLETE event per published model, the same by http and in the file
    events = web.bodies("/api/v1/lineage")
    lines = [json.loads(x) for x in (root / "lineage.jsonl").read_text().splitlines()]
    assert events == lines
    assert sorted(e["job"]["name"] for e in events) == [
        "backfill.fct_daily_sales",
        "backfill.fct_monthly_sales",
        "backfill.fct_sales_7d",
    ]
    for e in events:
        assert e["eventType"] == "COMPLETE" and e["job"]["namespace"] == "cli-test"
        (out,) = e["outputs"]
        facet = out["facets"]["backfill"]
        assert facet["publicationId"] == pub["id"] and facet["note"] == NOTE
        assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    daily = next(e for e in events if e["job"]["name"] == "backfill.fct_daily_sales")
    assert [
        p["identifier"]
        for p in daily["outputs"][0]["outputFacets"]["subset"]["outputCondition"]["partitions"]
    ] == ["2026-08-01", "2026-08-02", "2026-08-03"]

    # a forward-only change tells the same consumers and OpenLineage
    web.posts.clear()
    mail.messages.clear()
    r = backfill_cli(
        "forward",
        "fct_monthly_sales",
        "--from",
        "2026-12-01",
        "--note",
        "new column meaningful from December",
        "--no-estimate",
        "--json",
        *common,
        cwd=tmp_path,
    )
    fwd = json.loads(r.stdout)
    assert fwd["recorded"] and fwd["avoided_backfill"]["select"] == "fct_monthly_sales+"
    (body,) = web.bodies("/finance")
    assert (
        body["text"].splitlines()[0]
        == "[shop] fct_monthly_sales: forward-only change, history not rebuilt"
    )
    assert {tuple(to) for _, to, _ in mail.messages} == {("finance@shop.example",)}
    (event,) = web.bodies("/api/v1/lineage")
    assert event["job"]["name"] == "backfill.fct_monthly_sales"
    assert event["outputs"][0]["facets"]["backfill"]["kind"] == "forward"
    # both recorded in the changelog, with what each consumer was told
    log = json.loads(backfill_cli("changelog", "--format", "json", *common, cwd=tmp_path).stdout)
    assert [e["kind"] for e in log][:2] == ["forward", "publication"]
    assert {(d["channel"], d["consumer"]) for d in log[1]["deliveries"]} == set(told)
