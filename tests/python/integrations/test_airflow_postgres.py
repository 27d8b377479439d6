"""The backfill DAG under real Apache Airflow 3 with everything on one Postgres server: Airflow's
metadata database, the backfill ledger (``backfill_dag(..., ledger="postgresql://...")``) and the
warehouse (the shop on the Postgres engine), tasks in LocalExecutor worker processes. It
publishes the changelog the same backfill publishes on DuckDB.

Cost: ``airflow db migrate`` on Postgres (~20 s) plus the DAG run (a process per task instance,
two at a time). The backfill is small (2 tasks) for that reason.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
from airflow_support import migrate, run_dag
from backfill.examples import shop
from backfill.run.ledger import open_ledger
from shop_support import AS_OF, cli, copy_built

SELECT, START, END = "fct_daily_sales", "2026-07-31", "2026-08-02"


def changelog(root: Path) -> list[tuple[Any, ...]]:
    """The published changelog rows that do not depend on who, when or which engine: model,
    partition, measure and values (as text, 2 decimals: engines type them differently)."""
    rows = backfill.Project.load(root).changelog().rows.to_pylist()

    def num(v: Any) -> str:
        return "" if v is None else f"{float(v):.2f}"

    return sorted(
        (
            r["model"],
            r["partition"] or "",
            r["measure"] or "",
            num(r["value_old"]),
            num(r["value_new"]),
            r["rows_added"],
            r["rows_removed"],
            r["rows_changed"],
        )
        for r in rows
    )


def test_the_dag_runs_on_a_postgres_ledger_warehouse_and_metadata_db_with_local_executor(
    pg_server: Any,
    built_pg_shop: Any,
    built_shop: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pg_engine_support import subprocess_env

    meta = pg_server.create_database("airflow_meta")
    home = tmp_path / "home"
    migrate(home, db=meta)
    root, _warehouse = built_pg_shop.copy(tmp_path / "shop")
    shop.fix(root)
    ledger_url = pg_server.create_database("ledger")
    conf = {
        "dag_id": "backfill_fix",
        "project": str(root),
        "select": SELECT,
        "start": START,
        "end": END,
        "as_of": AS_OF,
        "note": "revenue from 1 Aug was overstated",
        "ledger": ledger_url,
        "executor": True,
    }
    # the worker processes must find the postgres engine (see pg_engine_support)
    monkeypatch.setenv("PYTHONPATH", subprocess_env().get("PYTHONPATH", ""))
    runs, output = run_dag(home, tmp_path / "af", conf, db=meta)
    (run,) = runs
    assert run["state"] == "success", output[-3000:]

    # Airflow recorded the run in its database on the Postgres server
    with psycopg.connect(meta) as db:
        assert db.execute("SELECT state FROM dag_run WHERE dag_id = 'backfill_fix'").fetchall() == [
            ("success",)
        ]

    # the ledger on Postgres: one backfill, published, every task done by one attempt, by
    # several LocalExecutor worker processes
    ledger = open_ledger(ledger_url)
    (rec,) = ledger.backfills()
    assert rec["status"] == "published"
    tasks = ledger.tasks(rec["id"])
    assert {t.status for t in tasks} == {"done"}
    attempts = ledger.attempts(rec["id"])
    assert Counter(a["task_id"] for a in attempts if a["status"] == "done") == Counter(
        {t.task_id: 1 for t in tasks}
    )
    assert len({a["worker"] for a in attempts}) > 1
    mapped = [t for t in run["tis"] if t["task_id"].endswith(".run")]
    assert len(mapped) == len(tasks) and {t["state"] for t in mapped} == {"success"}
    ledger.close()

    # the same changelog as the same backfill published on DuckDB through the CLI
    reference = copy_built(built_shop, tmp_path / "duckdb_shop")
    shop.fix(reference)
    ran = cli(
        "run",
        "--project",
        str(reference),
        "--select",
        SELECT,
        "--start",
        START,
        "--end",
        END,
        "--as-of",
        AS_OF,
        "--reason",
        "discount bug fixed",
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    bid = json.loads(ran.stdout)["id"]
    for args in (("audit", bid), ("publish", bid, "--note", "revenue from 1 Aug was overstated")):
        done = cli(*args, "--project", str(reference))
        assert done.returncode == 0, done.stderr
    published = changelog(root)
    assert published and published == changelog(reference)
