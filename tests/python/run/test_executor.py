"""The task executor shared by the thread-pool runner and Airflow, against a real SQLite ledger
and a scripted engine: what each kind of ending records, backoff, and leases (renewed while a
long task runs; a lease that cannot be renewed ends the attempt as lost, recording nothing)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import backfill
from backfill.engines import (
    Area,
    Engine,
    PartitionFingerprint,
    TaskFailure,
    TaskFingerprint,
    WriteResult,
)
from backfill.errors import InvalidInputError
from backfill.run import TaskExecutor, TaskOutcome
from backfill.run.ledger import Claim, SqliteLedger
from fake_engines import WriteOnlyEngine

FINGERPRINT = PartitionFingerprint(3, "00000000000000ab")
OTHER = "otherhost:1:other"  # a worker on another host: only its lease says whether it lives


class ScriptedEngine(WriteOnlyEngine):
    """Each run_task takes the next step: an exception to raise, or seconds to work and then
    write 3 rows (deleting 1). Without steps left it succeeds at once."""

    name = "scripted"

    def __init__(self, *steps: BaseException | float) -> None:
        self.steps = list(steps)
        self.calls = 0

    def run_task(self, project: Any, model: str, start: Any, end: Any, area: Area) -> WriteResult:
        self.calls += 1
        step = self.steps.pop(0) if self.steps else 0.0
        if isinstance(step, BaseException):
            raise step
        time.sleep(step)
        return WriteResult(3, 1, FINGERPRINT, step)


class SilentRenewLedger(SqliteLedger):
    """Renewals that do nothing (a ledger that accepts but loses them)."""

    def renew(
        self, backfill_id: str, worker: str, task_ids: Sequence[int], lease_seconds: float
    ) -> int:
        return len(task_ids)


class FailingRenewLedger(SqliteLedger):
    """Renewals that fail (the ledger unreachable while the task runs)."""

    def renew(
        self, backfill_id: str, worker: str, task_ids: Sequence[int], lease_seconds: float
    ) -> int:
        raise OSError("ledger unreachable")


WORKER = "thishost:0:me"


def make(
    tmp_path: Path, engine: Engine, ledger_type: type[SqliteLedger] = SqliteLedger
) -> backfill.Backfill:
    p = backfill.Project("exec")
    p.source("raw.t", grain="day", event_time="t")
    p.model("m", depends_on=["raw.t"], grain="day", event_time="t", sql="select 1")
    plan = p.plan("m", "2026-03-01", "2026-03-02", as_of="2026-12-01")
    return backfill.Backfill.create(
        p,
        plan,
        reason="executor test",
        engine=engine,
        ledger=ledger_type(tmp_path / "ledger.sqlite"),
    )


def claim(bf: backfill.Backfill, lease_seconds: float = 60.0) -> Claim:
    (c,) = bf.ledger.claim(bf.id, WORKER, 1, lease_seconds)
    return c


def execute(bf: backfill.Backfill, c: Claim, **kw: Any) -> TaskOutcome:
    args: dict[str, Any] = {"lease_seconds": 60.0, "max_attempts": 3, "backoff": 0.2, **kw}
    return TaskExecutor(
        project=bf.project,
        engine=bf.engine,
        ledger=bf.ledger,
        backfill_id=bf.id,
        area=bf.area,
        worker=WORKER,
        **args,
    ).execute(c)


def test_success_records_done_with_rows_and_fingerprint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bf = make(tmp_path, ScriptedEngine())
    with caplog.at_level(logging.INFO, logger="backfill.run.executor"):
        out = execute(bf, claim(bf))
    assert (out.status, out.ok, out.attempt, out.rows_written, out.rows_deleted) == (
        "done",
        True,
        1,
        3,
        1,
    )
    assert out.fingerprint == FINGERPRINT and str(out.fingerprint) == "3:00000000000000ab"
    (task,) = bf.tasks()
    assert (task.status, task.rows_written, task.fingerprint) == (
        "done",
        3,
        TaskFingerprint(FINGERPRINT),
    )
    (attempt,) = bf.attempts()
    assert (attempt["status"], attempt["rows_deleted"]) == ("done", 1)
    assert out.event().kind == "done" and out.event().rows == 3 and out.event().error is None
    assert f"backfill {bf.id}: m 2026-03-01 done in" in out.message
    assert out.message in caplog.messages


def test_a_transient_failure_is_retried_after_the_backoff_then_doubled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = ScriptedEngine(
        TaskFailure("locked", transient=True), TaskFailure("locked again", transient=True)
    )
    bf = make(tmp_path, engine)
    before = time.time()
    with caplog.at_level(logging.INFO, logger="backfill.run.executor"):
        first = execute(bf, claim(bf), backoff=0.3)
    assert (first.status, first.transient, first.error) == ("pending", True, "locked")
    assert first.retry_at is not None and before + 0.3 <= first.retry_at <= time.time() + 0.3
    assert "m 2026-03-01 (task 0) attempt 1 failed (transient): locked" in first.message
    assert first.event().kind == "retry"
    assert [r.levelno for r in caplog.records if r.message == first.message] == [logging.INFO]
    assert bf.ledger.claim(bf.id, WORKER, 1, 60) == []  # not due before the backoff
    time.sleep(max(0.0, first.retry_at - time.time()) + 0.02)
    second_claim = claim(bf)
    assert second_claim.attempt == 2
    began = time.time()
    second = execute(bf, second_claim, backoff=0.3)
    assert second.status == "pending" and second.retry_at is not None
    assert began + 0.6 <= second.retry_at <= time.time() + 0.6  # 0.3 * 2**(2-1)
    time.sleep(max(0.0, second.retry_at - time.time()) + 0.02)
    third = execute(bf, claim(bf), backoff=0.3)
    assert third.status == "done" and third.attempt == 3
    assert [a["status"] for a in bf.attempts()] == ["failed", "failed", "done"]


@pytest.mark.parametrize(
    "error",
    [TaskFailure("syntax error", transient=False), InvalidInputError("rows outside the period")],
)
def test_a_permanent_failure_fails_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    bf = make(tmp_path, ScriptedEngine(error))
    with caplog.at_level(logging.INFO, logger="backfill.run.executor"):
        out = execute(bf, claim(bf), max_attempts=5)
    assert (out.status, out.transient, out.retry_at, out.error) == (
        "failed",
        False,
        None,
        str(error),
    )
    assert f"attempt 1 failed (permanent): {error}" in out.message
    assert out.event().kind == "failed" and out.event().error == str(error)
    assert [r.levelno for r in caplog.records if r.message == out.message] == [logging.ERROR]
    (task,) = bf.tasks()
    assert (task.status, task.error) == ("failed", str(error))


def test_transient_failures_fail_once_max_attempts_are_spent(tmp_path: Path) -> None:
    bf = make(
        tmp_path,
        ScriptedEngine(
            TaskFailure("locked", transient=True), TaskFailure("locked", transient=True)
        ),
    )
    assert execute(bf, claim(bf), max_attempts=2, backoff=0.0).status == "pending"
    last = execute(bf, claim(bf), max_attempts=2, backoff=0.0)
    assert (last.status, last.attempt, last.transient) == ("failed", 2, True)
    assert bf.tasks()[0].status == "failed" and bf.ledger.claim(bf.id, WORKER, 1, 60) == []
    # Airflow's way: one attempt per try, the orchestrator retries.
    bf2 = make(tmp_path / "airflow", ScriptedEngine(TaskFailure("locked", transient=True)))
    once = execute(bf2, claim(bf2), max_attempts=1)
    assert (once.status, once.transient) == ("failed", True)


def test_an_unexpected_exception_is_transient(tmp_path: Path) -> None:
    bf = make(tmp_path, ScriptedEngine(OSError("disk hiccup")))
    out = execute(bf, claim(bf))
    assert (out.status, out.transient, out.error) == ("pending", True, "OSError: disk hiccup")
    assert bf.tasks()[0].error == "OSError: disk hiccup"


def test_a_task_longer_than_its_lease_keeps_it(tmp_path: Path) -> None:
    bf = make(tmp_path, ScriptedEngine(1.5))
    c = claim(bf, lease_seconds=0.5)
    outcomes: list[TaskOutcome] = []
    runner = threading.Thread(target=lambda: outcomes.append(execute(bf, c, lease_seconds=0.5)))
    runner.start()
    other = SqliteLedger(tmp_path / "ledger.sqlite")  # another worker's connection
    stolen = []
    for _ in range(5):  # well past the first lease's end
        time.sleep(0.25)
        stolen += other.claim(bf.id, OTHER, 10, 0.5)
    runner.join()
    assert stolen == []
    (out,) = outcomes
    assert out.status == "done"
    assert [(a["worker"], a["status"]) for a in bf.attempts()] == [(WORKER, "done")]


def test_a_lease_that_cannot_be_renewed_ends_as_lost_and_records_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bf = make(tmp_path, ScriptedEngine(0.6), FailingRenewLedger)
    with caplog.at_level(logging.WARNING, logger="backfill.run.executor"):
        out = execute(bf, claim(bf, lease_seconds=0.2), lease_seconds=0.2)
    assert (out.status, out.ok, out.transient) == ("lost", False, True)
    assert out.event().kind == "lost" and "lost its lease" in out.message
    assert "renewing the lease of task 0 failed" in caplog.text
    (task,) = bf.tasks()
    assert task.status != "done" and task.rows_written is None
    assert [a["status"] for a in bf.attempts()] == ["running"]  # its end is not ours to write
    # The ledger drops the expired lease: another worker runs the task afresh.
    (again,) = SqliteLedger(tmp_path / "ledger.sqlite").claim(bf.id, OTHER, 1, 60)
    assert again.attempt == 2
    assert [a["status"] for a in bf.attempts()] == ["abandoned", "running"]


def test_a_lease_taken_over_while_running_is_lost_not_done(tmp_path: Path) -> None:
    bf = make(tmp_path, ScriptedEngine(1.0), SilentRenewLedger)
    c = claim(bf, lease_seconds=0.2)
    outcomes: list[TaskOutcome] = []
    runner = threading.Thread(target=lambda: outcomes.append(execute(bf, c, lease_seconds=0.2)))
    runner.start()
    time.sleep(0.35)  # the lease has run out in the ledger: another worker takes the task
    (taken,) = SqliteLedger(tmp_path / "ledger.sqlite").claim(bf.id, OTHER, 1, 60)
    runner.join()
    (out,) = outcomes
    assert (out.status, out.transient, taken.attempt) == ("lost", True, 2)
    (task,) = bf.tasks()
    assert task.status == "running" and task.rows_written is None  # the other worker's now
    assert [a["worker"] for a in bf.attempts()] == [WORKER, OTHER]
    assert bf.attempts()[1]["status"] == "running"


def test_a_renewal_that_finds_its_lease_taken_stops_the_result_from_landing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bf = make(tmp_path, ScriptedEngine(1.0))
    c = claim(bf, lease_seconds=0.3)
    outcomes: list[TaskOutcome] = []
    runner = threading.Thread(target=lambda: outcomes.append(execute(bf, c, lease_seconds=0.3)))
    with caplog.at_level(logging.WARNING, logger="backfill.run.executor"):
        runner.start()
        time.sleep(0.15)
        # The worker stalled (a GC pause, a frozen VM) past its lease: test-side, the lease ends
        # in the ledger, and another worker takes the task while the first one still runs it.
        with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
            db.execute("UPDATE leases SET expires_at = 0")
        db.close()
        (taken,) = SqliteLedger(tmp_path / "ledger.sqlite").claim(bf.id, OTHER, 1, 60)
        runner.join()
    (out,) = outcomes
    assert (out.status, out.transient, taken.attempt) == ("lost", True, 2)
    assert f"the lease was taken from worker {WORKER}" in caplog.text
    first, second = bf.attempts()
    # finish was never called: the abandoned attempt carries no late report
    assert first["status"] == "abandoned" and "after losing the lease" not in first["error"]
    assert (second["worker"], second["status"]) == (OTHER, "running")
    assert bf.tasks()[0].rows_written is None


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    bf = make(tmp_path, ScriptedEngine())
    c = claim(bf)
    with pytest.raises(InvalidInputError, match="max_attempts 0"):
        execute(bf, c, max_attempts=0)
    with pytest.raises(InvalidInputError, match="backoff -1"):
        execute(bf, c, backoff=-1)
    with pytest.raises(InvalidInputError, match="lease_seconds 0"):
        execute(bf, c, lease_seconds=0)
