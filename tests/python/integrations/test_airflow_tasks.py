"""The plain task functions of backfill.integrations.airflow (no Airflow needed): idempotent
planning, claiming exactly one task through the ledger, no-op re-runs, idempotent publish,
gates that stop the DAG, and the ledger URL."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import backfill
from backfill.engines import TaskFailure
from backfill.errors import ConflictError, InvalidInputError, NotFoundError
from backfill.examples import shop
from backfill.integrations import airflow as bfa
from backfill.run.ledger import LedgerBackend, OverlapError, SqliteLedger, open_ledger
from shop_support import AS_OF, copy_built, query

SELECT, START, END = "fct_daily_sales+", "2026-07-30", "2026-08-03"


@pytest.fixture
def shop_dir(built_shop: Path, tmp_path: Path) -> Path:
    dest = copy_built(built_shop, tmp_path / "shop")
    shop.fix(dest)
    return dest


def plan(root: Path, key: str | None = "dag/run_1", **kw: object) -> str:
    args = {"reason": "discount bug fixed", "as_of": AS_OF, "idempotency_key": key, **kw}
    return bfa.plan_backfill(root, SELECT, START, END, **args)  # type: ignore[arg-type]


def ledger(root: Path) -> SqliteLedger:
    return SqliteLedger.for_project(root / ".backfill")


def run_all(root: Path, bid: str) -> None:
    for tid in bfa.task_ids(bid, project=root):
        bfa.run_task(bid, tid, project=root)


# -- plan ------------------------------------------------------------------------------------
def test_plan_is_idempotent_per_key_and_matches_the_plan(shop_dir: Path) -> None:
    bid = plan(shop_dir)
    assert bid == bfa.backfill_id_for("dag/run_1") == plan(shop_dir)  # a retried plan task
    with pytest.raises(OverlapError, match=bid):  # another run over the same open partitions
        plan(shop_dir, key="dag/run_2")
    assert plan(shop_dir, key="dag/run_2", allow_overlap="on purpose") != bid  # another backfill
    assert len(ledger(shop_dir).backfills()) == 2
    # plan_backfill plans one partition per task unless told otherwise
    p = backfill.Project.load(shop_dir).plan(SELECT, START, END, as_of=AS_OF, partitions_per_run=1)
    tasks = ledger(shop_dir).tasks(bid)
    assert len(tasks) == p.task_count
    assert bfa.task_ids(bid, project=shop_dir) == list(range(p.task_count))
    for wave in range(p.wave_count):
        assert bfa.task_ids(bid, wave, project=shop_dir) == [
            i for i in range(p.task_count) if p.task(i)["wave"] == wave
        ]
    daily = bfa.task_ids(bid, model="fct_daily_sales", project=shop_dir)
    assert [tasks[i].label for i in daily] == [
        "2026-07-30",
        "2026-07-31",
        "2026-08-01",
        "2026-08-02",
    ]
    assert bfa.task_label(bid, daily[0], project=shop_dir) == "fct_daily_sales 2026-07-30"


def test_plan_refuses_a_different_backfill_under_the_same_key(shop_dir: Path) -> None:
    bid = plan(shop_dir)
    with pytest.raises(ConflictError, match=rf"{bid} was recorded for this run with end"):
        bfa.plan_backfill(
            shop_dir,
            SELECT,
            START,
            "2026-08-05",
            reason="x",
            as_of=AS_OF,
            idempotency_key="dag/run_1",
        )
    with pytest.raises(InvalidInputError, match="idempotency_key ''"):
        plan(shop_dir, key="")
    with pytest.raises(InvalidInputError, match="wave -1"):
        bfa.task_ids(bid, -1, project=shop_dir)
    with pytest.raises(NotFoundError, match="no backfill 'bf_nope'"):
        bfa.task_ids("bf_nope", project=shop_dir)


def test_explicit_backfill_ids_are_validated(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    pl = p.plan(SELECT, START, END, as_of=AS_OF)
    with pytest.raises(InvalidInputError, match="backfill_id 'x; drop'"):
        backfill.Backfill.create(p, pl, reason="r", backfill_id="x; drop")


# -- run_task ----------------------------------------------------------------------------------
def test_run_task_runs_once_and_a_done_task_is_a_noop(shop_dir: Path) -> None:
    bid = plan(shop_dir)
    first = bfa.task_ids(bid, model="fct_daily_sales", project=shop_dir)[0]
    out = bfa.run_task(bid, first, project=shop_dir)
    assert (out["status"], out["skipped"], out["attempt"], out["label"]) == (
        "done",
        False,
        1,
        "2026-07-30",
    )
    again = bfa.run_task(bid, first, project=shop_dir)
    assert (again["status"], again["skipped"], again["fingerprint"]) == (
        "done",
        True,
        out["fingerprint"],
    )
    assert len(ledger(shop_dir).attempts(bid)) == 1  # the no-op wrote no attempt


def test_run_task_refuses_a_task_whose_dependencies_are_not_done(shop_dir: Path) -> None:
    bid = plan(shop_dir)
    monthly = bfa.task_ids(bid, model="fct_monthly_sales", project=shop_dir)[0]
    with pytest.raises(
        ConflictError,
        match=r"depends on tasks not done: fct_daily_sales "
        r"2026-07-30 \(task 0, pending\)",
    ):
        bfa.run_task(bid, monthly, project=shop_dir)
    with pytest.raises(NotFoundError, match="has no task 999"):
        bfa.run_task(bid, 999, project=shop_dir)
    with pytest.raises(InvalidInputError, match="task_id '3'"):
        bfa.run_task(bid, "3", project=shop_dir)  # type: ignore[arg-type]
    assert ledger(shop_dir).attempts(bid) == []


def test_a_task_held_by_a_live_worker_is_a_transient_failure(shop_dir: Path) -> None:
    bid = plan(shop_dir)
    led = ledger(shop_dir)
    # Another worker on this host, alive (a process of ours), holds task 0.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        claim = led.claim_task(bid, 0, f"{socket.gethostname()}:{other.pid}:other", 60)
        with pytest.raises(TaskFailure, match=r"task 0 of .* is running in worker") as info:
            bfa.run_task(bid, 0, project=shop_dir)
        assert info.value.transient  # Airflow retries it later
    finally:
        other.kill()
        other.wait()
    # A dead worker's lease is dropped: the task is claimed again at once.
    out = bfa.run_task(bid, 0, project=shop_dir)
    assert (out["status"], out["attempt"]) == ("done", 2)
    statuses = [a["status"] for a in led.attempts(bid)]
    assert statuses == ["abandoned", "done"] and claim.attempt == 1


def test_a_failed_sql_is_a_permanent_failure_recorded_in_the_ledger(shop_dir: Path) -> None:
    sql = shop_dir / "models" / "fct_daily_sales.sql"
    good = sql.read_text()
    assert 'from {{ ref("clean_orders") }} o' in good
    sql.write_text(
        good.replace(
            'from {{ ref("clean_orders") }} o', 'from no_such_table, {{ ref("clean_orders") }} o'
        )
    )
    bid = plan(shop_dir)
    with pytest.raises(
        TaskFailure,
        match=r"fct_daily_sales 2026-07-30 \(task 0\) attempt 1 "
        r"failed \(permanent\)",
    ) as info:
        bfa.run_task(bid, 0, project=shop_dir)
    assert not info.value.transient
    row = ledger(shop_dir).tasks(bid)[0]
    assert row.status == "failed" and row.error and "no_such_table" in row.error
    sql.write_text(good)  # fixed: the SQL differs from the planned one, so the run refuses...
    with pytest.raises(ConflictError, match="SQL of fct_daily_sales changed since it was planned"):
        bfa.run_task(bid, 0, project=shop_dir)
    # ... until the change is accepted (recorded); then Airflow (cleared by hand) runs it again
    backfill.Backfill.open(bid, project=shop_dir).check_sql("no_such_table was a typo")
    assert bfa.run_task(bid, 0, project=shop_dir)["attempt"] == 2


# -- audit and publish -------------------------------------------------------------------------
def test_audit_and_publish_are_idempotent(shop_dir: Path) -> None:
    bid = plan(shop_dir)
    with pytest.raises(InvalidInputError, match="not done"):
        bfa.audit(bid, project=shop_dir)
    run_all(shop_dir, bid)
    assert ledger(shop_dir).backfill(bid)["status"] == "done"
    summary = bfa.audit(bid, project=shop_dir)
    assert summary["passed"] and not summary["published"]
    daily = summary["models"]["fct_daily_sales"]
    assert (daily["partitions"], daily["changed_columns"]) == (4, {"revenue": 2})
    pub = bfa.publish(bid, "revenue from 1 Aug was overstated", project=shop_dir)
    rows = query(shop_dir, "SELECT count(*) FROM main.backfill_changelog")[0][0]
    again = bfa.publish(bid, "another note", project=shop_dir)
    assert again["id"] == pub["id"] and again["already_published"]
    assert (again["note"], again["models"]) == (pub["note"], pub["models"])
    assert query(shop_dir, "SELECT count(*) FROM main.backfill_changelog")[0][0] == rows
    audited = bfa.audit(bid, project=shop_dir)  # of a published backfill: the recorded audit
    assert audited == {**summary, "published": True}
    assert len(ledger(shop_dir).audits(bid)) == 3 and len(ledger(shop_dir).publications()) == 1


def test_a_failed_gate_raises(shop_dir: Path) -> None:
    bid = plan(shop_dir)
    run_all(shop_dir, bid)
    with pytest.raises(bfa.GateFailedError, match=r"GATES FAILED(.|\n)*changed_rows"):
        bfa.audit(bid, gates={"fct_daily_sales": [{"changed_rows": 0}]}, project=shop_dir)
    with pytest.raises(ConflictError, match="failed 1 gate"):
        bfa.publish(bid, "note", project=shop_dir)


# -- the ledger URL ----------------------------------------------------------------------------
def test_open_ledger_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = open_ledger(f"sqlite:///{tmp_path}/a/ledger.sqlite")
    assert absolute.path == tmp_path / "a" / "ledger.sqlite" and absolute.path.exists()
    monkeypatch.chdir(tmp_path)
    assert open_ledger("sqlite:///rel/l.sqlite").path == Path("rel/l.sqlite")
    assert open_ledger(tmp_path / "p.sqlite").path == tmp_path / "p.sqlite"
    assert isinstance(absolute, LedgerBackend)
    with pytest.raises(InvalidInputError, match="unknown scheme 'mysql'"):
        open_ledger("mysql://db/backfill")  # postgresql:// ledgers: test_ledger_postgres.py
    with pytest.raises(InvalidInputError, match="three slashes"):
        open_ledger("sqlite://host/x")


def test_the_functions_use_the_ledger_url_given(shop_dir: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared/ledger.sqlite"
    bid = plan(shop_dir, ledger=url)
    assert (
        not (shop_dir / ".backfill" / "ledger.sqlite").exists()
        or ledger(shop_dir).backfills() == []
    )
    assert bfa.task_ids(bid, project=shop_dir, ledger=url)
    out = bfa.run_task(bid, 0, project=shop_dir, ledger=url)
    assert open_ledger(url).tasks(bid)[0].status == out["status"] == "done"
