"""The backfill DAG under real Apache Airflow 3 (``dag.test()`` on a SQLite metadata database,
in a subprocess): same published tables as the CLI, re-runs change nothing, Airflow retries
transient failures without duplicating rows and fails permanent ones at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

import backfill
from airflow_support import env, migrate, run_dag
from backfill.examples import shop
from backfill.run.ledger import SqliteLedger
from shop_support import AS_OF, cli, copy_built, query

SELECT, START, END = "fct_daily_sales+", "2026-07-30", "2026-08-03"
MODELS = [
    "clean_orders",
    "clean_order_items",
    "fct_daily_sales",
    "fct_sales_7d",
    "fct_monthly_sales",
]


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airflow") / "home"
    migrate(home)
    return home


@pytest.fixture
def fixed_shop(built_shop: Path, tmp_path: Path) -> Path:
    dest = copy_built(built_shop, tmp_path / "shop")
    shop.fix(dest)
    return dest


def conf(root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "dag_id": "backfill_fix",
        "project": str(root),
        "select": SELECT,
        "start": START,
        "end": END,
        "as_of": AS_OF,
        "note": "revenue from 1 Aug was overstated",
        **extra,
    }


def fingerprints(root: Path) -> dict[str, str]:
    """backfill.fingerprint of every published model table (order-insensitive)."""
    c = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        tables = {
            r[0]
            for r in c.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        }
        assert set(MODELS) <= tables, tables
        return {
            m: backfill.fingerprint(c.sql(f'SELECT * FROM main."{m}"').to_arrow_table()).digest
            for m in MODELS
        }
    finally:
        c.close()


def changelog(root: Path) -> list[tuple[Any, ...]]:
    return sorted(
        query(
            root,
            "SELECT model, coalesce(partition, ''), coalesce(measure, ''), "
            "value_old, value_new FROM main.backfill_changelog",
        ),
        key=repr,
    )


def cli_backfill(root: Path, select: str = SELECT, start: str = START, end: str = END) -> str:
    r = cli(
        "run",
        "--project",
        str(root),
        "--select",
        select,
        "--start",
        start,
        "--end",
        end,
        "--as-of",
        AS_OF,
        "--reason",
        "discount bug fixed",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    bid = json.loads(r.stdout)["id"]
    for args in (("audit", bid), ("publish", bid, "--note", "revenue from 1 Aug was overstated")):
        r = cli(*args, "--project", str(root))
        assert r.returncode == 0, r.stderr
    return str(bid)


def ledger_of(root: Path) -> tuple[SqliteLedger, str]:
    ledger = SqliteLedger.for_project(root / ".backfill")
    ids = [b["id"] for b in ledger.backfills()]
    assert len(ids) == 1, ids  # Airflow's retries and re-runs never planned a second backfill
    return ledger, ids[0]


def tis(run: dict[str, Any], task_id: str) -> list[dict[str, Any]]:
    return [t for t in run["tis"] if t["task_id"] == task_id]


# -- end to end: the same tables as the CLI, and a re-run changes nothing ------------------------
def test_dag_publishes_what_the_cli_publishes_and_a_rerun_changes_nothing(
    built_shop: Path, fixed_shop: Path, tmp_path: Path, airflow_home: Path
) -> None:
    before = fingerprints(fixed_shop)
    reference = copy_built(built_shop, tmp_path / "cli_shop")
    shop.fix(reference)
    cli_backfill(reference)

    runs, output = run_dag(airflow_home, tmp_path / "af", conf(fixed_shop, runs=2))
    first, second = runs
    assert first["run_id"] == second["run_id"]  # the second dag.test re-ran the same DAG run
    assert first["state"] == second["state"] == "success"

    # One mapped task instance per backfill task, labelled with its partition in the UI.
    ledger, bid = ledger_of(fixed_shop)
    tasks = ledger.tasks(bid)
    for model in ("fct_daily_sales", "fct_sales_7d", "fct_monthly_sales"):
        mine = [t for t in tasks if t.model == model]
        mapped = tis(first, f"{model}.run")
        assert sorted(t["label"] for t in mapped) == sorted(f"{model} {t.label}" for t in mine)
        assert {t["state"] for t in mapped} == {"success"}
    assert {t.status for t in tasks} == {"done"}
    assert ledger.backfill(bid)["status"] == "published"

    # The same published tables as the CLI backfill, and the fix did change them.
    after = fingerprints(fixed_shop)
    assert after == fingerprints(reference)
    assert after["fct_daily_sales"] != before["fct_daily_sales"]
    assert after["clean_orders"] == before["clean_orders"]  # not selected: untouched
    assert changelog(fixed_shop) == changelog(reference)

    # The re-run: every task a no-op through the ledger; nothing written, audited or published.
    attempts = ledger.attempts(bid)
    assert len(attempts) == len(tasks)  # one attempt per task over both runs
    assert len(ledger.publications(bid)) == 1
    assert len({a.audit_id for a in ledger.audits(bid)}) == 1  # audited once, not again
    assert len({a.model for a in ledger.audits(bid)}) == len(ledger.audits(bid)) == 3
    assert "already planned for this run" in output
    assert output.count("is already done; nothing to do") == len(tasks)
    assert "is already published; nothing to do" in output

    # Task logs carry our log records, with the partition being run.
    assert f"backfill {bid}: running fct_daily_sales 2026-08-01 (task" in output


# -- retries -------------------------------------------------------------------------------------
def test_airflow_workers_retry_a_transient_failure_without_duplicating_rows(
    built_shop: Path, fixed_shop: Path, tmp_path: Path, airflow_home: Path
) -> None:
    """Real LocalExecutor worker processes (two at a time) on one ledger and one warehouse;
    a small backfill, as each task instance is a new process importing Airflow."""
    period = {"select": "fct_daily_sales", "start": "2026-07-31", "end": "2026-08-03"}
    reference = copy_built(built_shop, tmp_path / "cli_shop")
    shop.fix(reference)
    cli_backfill(reference, *period.values())
    fail = {
        "model": "fct_daily_sales",
        "start": "2026-08-01",
        "times": 1,
        "transient": True,
        "marker": str(tmp_path / "failed_once"),
    }
    runs, _ = run_dag(
        airflow_home, tmp_path / "af", conf(fixed_shop, **period, fail=fail, executor=True)
    )
    (run,) = runs
    assert run["state"] == "success"
    flaky = [t for t in tis(run, "fct_daily_sales.run") if t["label"].endswith("2026-08-01")]
    assert [t["try_number"] for t in flaky] == [2]  # Airflow retried it once
    assert {t["try_number"] for t in tis(run, "fct_daily_sales.run")} - {2} == {1}

    ledger, bid = ledger_of(fixed_shop)
    task = next(
        t for t in ledger.tasks(bid) if t.model == "fct_daily_sales" and t.label == "2026-08-01"
    )
    tries = [a for a in ledger.attempts(bid) if a["task_id"] == task.task_id]
    assert [a["status"] for a in tries] == ["failed", "done"]
    assert "injected failure #1: connection reset" in tries[0]["error"]
    assert len({a["worker"] for a in ledger.attempts(bid)}) > 1  # several worker processes

    # The task log files of both tries carry our records: the partition, then our error.
    logs = (
        tmp_path
        / "af"
        / "airflow"
        / "logs"
        / "dag_id=backfill_fix"
        / f"run_id={run['run_id']}"
        / "task_id=fct_daily_sales.run"
        / f"map_index={flaky[0]['map_index']}"
    )
    first, second = (logs / "attempt=1.log").read_text(), (logs / "attempt=2.log").read_text()
    assert (
        f"backfill {bid}: running fct_daily_sales 2026-08-01 (task {task.task_id}, "
        "attempt 1" in first
    )
    assert "failed (transient): injected failure #1: connection reset" in first
    assert "attempt 2" in second and "fct_daily_sales 2026-08-01 done in" in second

    # The partition written twice is there once: same tables as the CLI, one row per day.
    assert fingerprints(fixed_shop) == fingerprints(reference)
    dup = query(
        fixed_shop,
        "SELECT sales_date, count(*) FROM main.fct_daily_sales GROUP BY 1 HAVING count(*) > 1",
    )
    assert dup == []


def test_a_permanent_failure_fails_at_once_and_publishes_nothing(
    fixed_shop: Path, tmp_path: Path, airflow_home: Path
) -> None:
    before = fingerprints(fixed_shop)
    fail = {
        "model": "fct_daily_sales",
        "start": "2026-08-01",
        "times": 5,
        "transient": False,
        "marker": str(tmp_path / "failed"),
    }
    runs, output = run_dag(airflow_home, tmp_path / "af", conf(fixed_shop, fail=fail))
    (run,) = runs
    assert run["state"] == "failed"
    broken = [t for t in tis(run, "fct_daily_sales.run") if t["label"].endswith("2026-08-01")]
    assert [(t["state"], t["try_number"]) for t in broken] == [("failed", 1)]  # no retry
    downstream = {
        t["task_id"]: t["state"]
        for t in run["tis"]
        if t["task_id"] in ("fct_sales_7d.run", "audit", "publish")
    }
    assert set(downstream.values()) == {"upstream_failed"}
    assert "(permanent): injected failure #1: connection reset" in output
    assert fingerprints(fixed_shop) == before  # nothing published

    ledger, bid = ledger_of(fixed_shop)
    assert [
        t.status
        for t in ledger.tasks(bid)
        if t.label == "2026-08-01" and t.model == "fct_daily_sales"
    ] == ["failed"]
    assert ledger.publications(bid) == []


def test_a_failed_gate_stops_the_dag_before_publishing(
    fixed_shop: Path, tmp_path: Path, airflow_home: Path
) -> None:
    before = fingerprints(fixed_shop)
    gates = {"fct_daily_sales": [{"changed_rows": 0}]}
    runs, output = run_dag(airflow_home, tmp_path / "af", conf(fixed_shop, gates=gates))
    (run,) = runs
    states = {t["task_id"]: (t["state"], t["try_number"]) for t in run["tis"]}
    assert states["audit"] == ("failed", 1)  # a gate is not retried
    assert states["publish"][0] == "upstream_failed"
    assert "GATES FAILED" in output and "changed_rows" in output
    assert fingerprints(fixed_shop) == before


# -- the DAG's shape -----------------------------------------------------------------------------
SHAPE = """
import json, sys
from backfill import BackfillError
from backfill.integrations.airflow import backfill_dag
from airflow.providers.standard.operators.hitl import ApprovalOperator
def _error(**bad):
    args = {"concurrency": 2, "select": "fct_daily_sales", "reason": "r", **bad}
    try:
        backfill_dag("bad", sys.argv[1], args.pop("select"), "2026-08-01", "2026-08-08", **args)
    except BackfillError as exc:
        return exc
    return None
dag = backfill_dag("shape", sys.argv[1], "fct_daily_sales+", "2026-08-01", "2026-08-08",
                   concurrency=3, reason="discount bug fixed",
                   approval={"assigned_users": [{"id": "ana", "name": "Ana"}]})
print(json.dumps({
    "tasks": {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks},
    "mapped": {t.task_id: t.max_active_tis_per_dagrun for t in dag.tasks
               if type(t).__name__.endswith("MappedOperator")},
    "approve": isinstance(dag.task_dict["approve"], ApprovalOperator),
    "max_active_tasks": dag.max_active_tasks,
    "fileloc": dag.fileloc,
    "errors": [str(_error(**bad)) for bad in ({"concurrency": 0}, {"select": "nope*"},
                                               {"reason": " "}, {"approval": "yes"})],
}))
"""


def test_dag_shape_follows_the_models_and_approval_gates_publish(
    built_shop: Path, tmp_path: Path, airflow_home: Path
) -> None:
    script = tmp_path / "shape.py"
    script.write_text(SHAPE)
    r = subprocess.run(
        [sys.executable, str(script), str(built_shop)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(airflow_home, tmp_path),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    shape = json.loads(r.stdout.strip().splitlines()[-1])
    up = shape["tasks"]
    # Each model's mapped task waits for its selected parents' (fct_sales_7d and
    # fct_monthly_sales read fct_daily_sales), not for unrelated models.
    assert up["fct_daily_sales.run"] == ["fct_daily_sales.tasks", "plan"]
    assert up["fct_sales_7d.run"] == ["fct_daily_sales.run", "fct_sales_7d.tasks", "plan"]
    assert up["fct_monthly_sales.run"] == ["fct_daily_sales.run", "fct_monthly_sales.tasks", "plan"]
    assert up["audit"] == [
        "fct_daily_sales.run",
        "fct_monthly_sales.run",
        "fct_sales_7d.run",
        "plan",
    ]
    assert up["approve"] == ["audit"] and shape["approve"]
    assert up["publish"] == ["approve", "plan"]
    assert shape["mapped"] == {
        f"{m}.run": 3 for m in ("fct_daily_sales", "fct_sales_7d", "fct_monthly_sales")
    }
    assert shape["max_active_tasks"] == 3
    assert shape["fileloc"] == str(script)  # workers re-import the user's file, not ours
    assert shape["errors"] == [
        "concurrency 0 is not a positive integer",
        "selector 'nope*' matches no model",
        "a backfill needs a reason, e.g. reason='discount bug fixed'",
        "approval 'yes': expected True/False or a dict of ApprovalOperator arguments",
    ]


# -- approval ------------------------------------------------------------------------------------
@pytest.mark.parametrize("choice", ["Approve", "Reject"])
def test_publish_waits_for_the_approval(
    choice: str, fixed_shop: Path, tmp_path: Path, airflow_home: Path
) -> None:
    before = fingerprints(fixed_shop)
    runs, _output = run_dag(
        airflow_home, tmp_path / "af", conf(fixed_shop, approval=True, respond=choice)
    )
    (run,) = runs
    states = {t["task_id"]: t["state"] for t in run["tis"]}
    assert states["audit"] == states["approve"] == "success"
    # The reviewer answered the task waiting for input (Airflow's state AWAITING_INPUT).
    assert run["hitl"] == [{"chosen": [choice], "by": "Ana"}]
    ledger, bid = ledger_of(fixed_shop)
    if choice == "Approve":
        assert states["publish"] == "success"
        assert ledger.backfill(bid)["status"] == "published"
        assert fingerprints(fixed_shop)["fct_daily_sales"] != before["fct_daily_sales"]
    else:
        assert states["publish"] == "skipped"
        assert ledger.backfill(bid)["status"] == "done"  # audited, awaiting a decision
        assert fingerprints(fixed_shop) == before


# -- pause and cancel ----------------------------------------------------------------------------
def test_mapped_tasks_of_a_paused_backfill_wait_and_of_a_cancelled_one_are_skipped(
    fixed_shop: Path, tmp_path: Path, airflow_home: Path
) -> None:
    """An operator pauses the backfill right after it is planned (``backfill pause`` in another
    process): its mapped tasks are rescheduled, not failed. Seeing them wait, the operator
    cancels it: they, the audit and publish are skipped with the reason; nothing is published."""
    before = fingerprints(fixed_shop)
    period = {"select": "fct_daily_sales", "start": "2026-07-31", "end": "2026-08-03"}
    runs, output = run_dag(
        airflow_home,
        tmp_path / "af",
        conf(
            fixed_shop,
            **period,
            control=["pause"],
            recheck=1,
            on_reschedule=["cancel", "--reason", "wrong period"],
        ),
    )
    (run,) = runs
    assert run["state"] == "success"  # nothing failed: it was held, then stopped on purpose
    mapped = tis(run, "fct_daily_sales.run")
    assert len(mapped) == 3 and {t["state"] for t in mapped} == {"skipped"}
    assert any(t["reschedules"] >= 1 for t in mapped), mapped  # waited while paused
    assert {t["try_number"] for t in mapped} == {1}  # no retry used up while paused
    states = {t["task_id"]: t["state"] for t in run["tis"]}
    assert states["audit"] == states["publish"] == "skipped"
    assert "paused: running tasks finish" in output and "; checking again in 0:00:01" in output
    assert "is cancelled; nothing more of it runs" in output
    assert "('wrong period'); not auditing it" in output
    assert fingerprints(fixed_shop) == before
    ledger, bid = ledger_of(fixed_shop)
    assert ledger.backfill(bid)["status"] == "cancelled" and ledger.attempts(bid) == []
