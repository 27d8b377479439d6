"""Backfills as Airflow 3 tasks: planned once, one mapped task instance per backfill task
(a model's partitions), retried by Airflow, audited and published by downstream tasks.

>>> from backfill.integrations.airflow import backfill_dag
>>> dag = backfill_dag("fix_discounts", "/srv/shop", "fct_daily_sales+", "2026-08-01",
...                    "2026-10-29", concurrency=8, reason="discount bug fixed",
...                    note="revenue from 1 Aug was overstated", approval=True)  # doctest: +SKIP

The ledger is the single source of truth, so Airflow's retries and re-runs never double a
partition: ``plan_backfill`` derives the backfill id from the DAG run (a retried or re-run plan
task finds the backfill it recorded), ``run_task`` claims exactly its task through a lease (a
done task is a no-op; a task another live worker holds fails as transient so Airflow retries it
later), ``audit`` of a published backfill returns the recorded audit and ``publish`` of a
published one returns the recorded publication. A paused backfill's tasks raise
``BackfillPausedError`` (the DAG reschedules them until ``backfill resume``); a cancelled one's
tasks, audit and publish raise ``BackfillCancelledError`` (the DAG skips them, with the reason).

The plain functions below need no Airflow; :func:`backfill_dag` (:mod:`.dag`) wraps them
in TaskFlow tasks. Every function finds the ledger in the project's state directory, or at
``ledger`` (``sqlite:///path``, see :func:`backfill.run.open_ledger`).

Limit: the ledger is a SQLite file, so every worker must run on the machine that holds it
(LocalExecutor, or ``dag.test()``); SQLite locking is unsafe over network file systems. The
DuckDB warehouse has the same limit (one writer process at a time; tasks in several worker
processes take turns on the file). A shared ledger for Celery/Kubernetes workers comes with the
Postgres backend.
"""

from __future__ import annotations

import hashlib
import logging
import signal
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...api import Backfill, plan_with_history
from ...api import load as _load
from ...engines import TaskFailure
from ...engines.registry import engine_for
from ...errors import ConflictError, InvalidInputError
from ...publish import latest_audit, recorded_publication, rollback_publication
from ...publish.reconcile import reconcile
from ...run import Stop, TaskExecutor, TaskOutcome, ledger_for, on_signals
from ...run.ledger import (
    BackfillCancelledError,
    BackfillExistsError,
    BackfillPausedError,
    BackfillState,
    Claim,
    LedgerBackend,
    TaskBusyError,
    TaskRow,
    TaskState,
    new_worker_id,
    open_ledger,
)
from ...run.ledger.states import BACKFILL_TRANSITIONS, sources
from ...run.stop import drain

if TYPE_CHECKING:  # pragma: no cover
    import datetime as dt

    from ...model.project import Project
    from ...plan.plan import Plan

log = logging.getLogger(__name__)

__all__ = [
    "GateFailedError",
    "audit",
    "backfill_id_for",
    "plan_backfill",
    "publish",
    "rollback",
    "run_task",
    "task_ids",
    "task_label",
]


class GateFailedError(ConflictError):
    """The audit failed a gate: the DAG stops before publishing."""


def backfill_id_for(idempotency_key: str) -> str:
    """The backfill id recorded for ``idempotency_key`` (e.g. ``"<dag_id>/<run_id>"``)."""
    if not isinstance(idempotency_key, str) or not idempotency_key.strip():
        raise InvalidInputError(
            f"idempotency_key {idempotency_key!r}: expected a non-empty "
            "string such as '<dag_id>/<run_id>'"
        )
    return "bf_run_" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:16]


def _ledger(proj: Project, ledger: LedgerBackend | str | Path | None) -> LedgerBackend:
    if isinstance(ledger, (str, Path)):
        return open_ledger(ledger)
    return ledger if ledger is not None else ledger_for(proj)


def _open(
    backfill_id: str,
    project: Project | str | Path | None,
    ledger: LedgerBackend | str | Path | None,
) -> Backfill:
    proj = _load(project)
    led = _ledger(proj, ledger)
    led.backfill(backfill_id)  # NotFoundError naming recent ids
    return Backfill(proj, backfill_id, ledger=led, engine=engine_for(proj))


# -- plan ------------------------------------------------------------------------------------
#: The keywords of plan_backfill that go to the planner, and those that go to the record.
_PLAN_KEYWORDS = ("exclude", "as_of", "tz", "propagate", "partitions_per_run", "allow_append")
_RECORD_KEYWORDS = ("lint", "allow_overlap")


def plan_backfill(
    project: Project | str | Path,
    select: str,
    start: dt.datetime | dt.date | str,
    end: dt.datetime | dt.date | str,
    *,
    reason: str,
    idempotency_key: str | None = None,
    ledger: LedgerBackend | str | Path | None = None,
    **options: Any,
) -> str:
    """Plans the backfill and records it in the ledger (audit mode); returns its id. The plan's
    options are ``exclude``, ``as_of``, ``tz``, ``propagate``, ``partitions_per_run`` (default
    1) and ``allow_append`` (see :meth:`backfill.Project.plan`); ``lint`` (default True)
    refuses a plan whose models' lint finds errors. Refused (``OverlapError``) when an open
    backfill writes the same partitions, unless ``allow_overlap`` says why.

    With ``idempotency_key`` (the DAG uses ``"<dag_id>/<run_id>"``) the id is derived from the
    key, and a second call with the same key returns the backfill already recorded instead of
    planning another -- provided it asks for the same selection and period (else
    ``ConflictError``)."""
    unknown = sorted(set(options) - {*_PLAN_KEYWORDS, *_RECORD_KEYWORDS})
    if unknown:
        raise TypeError(f"plan_backfill() got unexpected keyword argument(s) {unknown}")
    planning = {k: v for k, v in options.items() if k in _PLAN_KEYWORDS}
    planning.setdefault("partitions_per_run", 1)
    record = {k: v for k, v in options.items() if k in _RECORD_KEYWORDS}
    proj = _load(project)
    led = _ledger(proj, ledger)
    plan = plan_with_history(proj, select, start, end, history=True, **planning)
    if idempotency_key is None:
        bf = Backfill.create(proj, plan, reason=reason, ledger=led, **record)
        return bf.id
    bid = backfill_id_for(idempotency_key)
    existing = _existing(led, bid, plan)
    if existing is not None:
        return existing
    try:
        Backfill.create(
            proj,
            plan,
            reason=reason,
            ledger=led,
            backfill_id=bid,
            **record,
        )
    except BackfillExistsError:  # another attempt of the same run recorded it just now
        found = _existing(led, bid, plan)
        if found is None:  # pragma: no cover - the insert failed for another reason
            raise
        return found
    return bid


def _existing(led: LedgerBackend, bid: str, plan: Plan) -> str | None:
    try:
        rec = led.backfill(bid)
    except KeyError:
        return None
    asked = {
        "selection": plan.select,
        "exclude": plan.exclude,
        "start": plan.start.isoformat(),
        "end": plan.end.isoformat(),
    }
    differs = {k: (getattr(rec, k), v) for k, v in asked.items() if getattr(rec, k) != v}
    if differs:
        shown = ", ".join(f"{k} {old!r} (now {new!r})" for k, (old, new) in differs.items())
        raise ConflictError(
            f"backfill {bid} was recorded for this run with {shown}; a run "
            "keeps its backfill: trigger a new DAG run for a different one"
        )
    log.info("backfill %s already planned for this run (%s); not planning again", bid, rec.status)
    return bid


# -- tasks -----------------------------------------------------------------------------------
def task_ids(
    backfill_id: str,
    wave: int | None = None,
    *,
    model: str | None = None,
    project: Project | str | Path | None = None,
    ledger: LedgerBackend | str | Path | None = None,
) -> list[int]:
    """The backfill's task ids (all, or those of one ``wave`` and/or one ``model``), in order."""
    if wave is not None and (isinstance(wave, bool) or not isinstance(wave, int) or wave < 0):
        raise InvalidInputError(f"wave {wave!r} is not a non-negative integer")
    proj = _load(project)
    led = _ledger(proj, ledger)
    tasks = led.tasks(backfill_id)
    if not tasks:
        led.backfill(backfill_id)  # NotFoundError for an unknown id
    if model is not None and model not in {t.model for t in tasks} and model not in proj.models:
        raise InvalidInputError(f"model {model!r} is not in project {proj.name!r}")
    return [
        t.task_id
        for t in tasks
        if (wave is None or t.wave == wave) and (model is None or t.model == model)
    ]


def task_label(
    backfill_id: str,
    task_id: int,
    *,
    project: Project | str | Path | None = None,
    ledger: LedgerBackend | str | Path | None = None,
) -> str:
    """``"<model> <partition label>"`` of a task (the Airflow map index label)."""
    led = _ledger(_load(project), ledger)
    for t in led.tasks(backfill_id):
        if t.task_id == task_id:
            return f"{t.model} {t.label}"
    raise InvalidInputError(f"backfill {backfill_id} has no task {task_id!r}")


def run_task(
    backfill_id: str,
    task_id: int,
    *,
    project: Project | str | Path | None = None,
    ledger: LedgerBackend | str | Path | None = None,
    lease_seconds: float = 60.0,
) -> dict[str, Any]:
    """Runs task ``task_id`` of the backfill once, through a ledger lease; returns what it did.

    A done task is a no-op (``"skipped": True``). Raises :class:`TaskFailure` with
    ``transient=True`` when the task is worth retrying (another live worker holds it, a lock, a
    lost lease, an unexpected error) and ``transient=False`` when it fails the same way every
    time (a SQL error, rows outside the period); the attempt is recorded either way. Raises
    :class:`~backfill.run.ledger.BackfillPausedError` while the backfill is paused (nothing
    ran; try again after ``backfill resume``) and
    :class:`~backfill.run.ledger.BackfillCancelledError` once it is cancelled (nothing more of
    it runs); the DAG reschedules, respectively skips, the task. On SIGTERM (Airflow killing
    the task) the engine is interrupted, the attempt recorded as interrupted and the task made
    pending again (its lease released), and a transient :class:`TaskFailure` is raised."""
    if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 0:
        raise InvalidInputError(f"task_id {task_id!r} is not a non-negative integer")
    if not lease_seconds > 0:
        raise InvalidInputError(f"lease_seconds {lease_seconds!r} must be > 0")
    bf = _open(backfill_id, project, ledger)
    try:
        rec = bf.ledger.backfill(bf.id)
        if rec.status is BackfillState.DISCARDED:
            raise InvalidInputError(f"backfill {bf.id} is discarded; it cannot run")
        if rec.status is BackfillState.PUBLISHED:  # its audit area is gone: only no-ops
            finished = {t.task_id: t for t in bf.ledger.tasks(bf.id) if t.status == TaskState.DONE}
            if task_id not in finished:
                raise InvalidInputError(
                    f"backfill {bf.id} is published; task {task_id} cannot run any more"
                )
            log.info(
                "backfill %s is published: task %d is already done; nothing to do", bf.id, task_id
            )
            return _result(bf.id, finished[task_id], skipped=True)
        bf.check_sql()  # a model edited since the plan task: refuse, naming it
        worker = new_worker_id()
        try:
            claim = bf.ledger.claim_task(bf.id, task_id, worker, lease_seconds)
        except TaskBusyError as exc:  # a live worker runs it: Airflow retries later
            raise TaskFailure(str(exc), transient=True) from exc
        except BackfillPausedError:  # the DAG reschedules the task; a done one needs nothing
            already = [
                t
                for t in bf.ledger.tasks(bf.id)
                if t.task_id == task_id and t.status == TaskState.DONE
            ]
            if not already:
                raise
            return _result(bf.id, already[0], skipped=True)
        if isinstance(claim, TaskRow):
            log.info(
                "backfill %s: %s %s (task %d) is already done; nothing to do",
                bf.id,
                claim.model,
                claim.label,
                task_id,
            )
            return _result(bf.id, claim, skipped=True)
        if rec.status is not BackfillState.RUNNING:
            bf.ledger.set_status(bf.id, BackfillState.RUNNING)
        # Airflow retries the task itself (its retries and retry_delay): one attempt per try.
        outcome = _execute_stoppable(claim, bf, worker, lease_seconds)
        if not outcome.ok:  # a lost lease is transient: another try finds the task free
            raise TaskFailure(outcome.message, transient=outcome.transient)
        _finish_if_complete(bf)
        done = bf.ledger.tasks(bf.id)[task_id]
        return {
            **_result(bf.id, done, skipped=False),
            "attempt": outcome.attempt,
            "seconds": round(outcome.seconds, 3),
            "rows_deleted": outcome.rows_deleted,
        }
    finally:
        bf.engine.close()  # other worker processes take the warehouse file in turn


def _execute_stoppable(
    claim: Claim, bf: Backfill, worker: str, lease_seconds: float
) -> TaskOutcome:
    """Runs the claimed task on a helper thread while this (main) thread watches for SIGTERM,
    which Airflow sends when it kills a task (then SIGKILL a few seconds later): the engine's
    statement is interrupted at once (nothing commits), the attempt is recorded as interrupted
    and the task pending again with its lease released, so Airflow's retry or a resume runs it
    without waiting for a lease to expire. Airflow's own SIGTERM handler still runs."""
    stop = Stop()
    executor = TaskExecutor(
        project=bf.project,
        engine=bf.engine,
        ledger=bf.ledger,
        backfill_id=bf.id,
        area=bf.area,
        worker=worker,
        lease_seconds=lease_seconds,
        max_attempts=1,
        backoff=0.0,
        stop=stop,
    )
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"backfill-{bf.id}")
    left = 0
    try:
        with on_signals(stop, (signal.SIGTERM,), chain=True):
            fut = pool.submit(executor.execute, claim)
            while not fut.done() and not stop.requested:
                wait([fut], timeout=0.2)
            if stop.requested:
                left = drain({fut}, stop, 0.0, bf.engine, lambda _f: None, f"backfill {bf.id}")
                if left:  # the engine cannot interrupt: its lease ends with this process
                    raise TaskFailure(
                        f"backfill {bf.id}: {claim.task.model} "
                        f"{claim.task.label} (task {claim.task.task_id}) was "
                        f"stopped by {stop.describe()} while it ran; it runs "
                        "again once its lease ends",
                        transient=True,
                    )
        return fut.result()
    finally:
        pool.shutdown(wait=not left)


def _finish_if_complete(bf: Backfill) -> None:
    tasks = bf.ledger.tasks(bf.id)
    may_finish = sources(BACKFILL_TRANSITIONS, BackfillState.DONE)
    status = bf.ledger.backfill(bf.id).status
    if all(t.status == TaskState.DONE for t in tasks) and status in may_finish:
        bf.ledger.set_status(bf.id, BackfillState.DONE, finished=True)
        log.info("backfill %s: all %d task(s) done", bf.id, len(tasks))


def _result(backfill_id: str, t: TaskRow, *, skipped: bool) -> dict[str, Any]:
    return {
        "backfill_id": backfill_id,
        "task_id": t.task_id,
        "model": t.model,
        "label": t.label,
        "status": t.status,
        "skipped": skipped,
        "attempts": t.attempts,
        "rows_written": t.rows_written,
        "fingerprint": None if t.fingerprint is None else t.fingerprint.encode(),  # XCom: text
    }


# -- audit and publish -----------------------------------------------------------------------
def audit(
    backfill_id: str,
    *,
    gates: Mapping[str, Any] | None = None,
    project: Project | str | Path | None = None,
    ledger: LedgerBackend | str | Path | None = None,
) -> dict[str, Any]:
    """Audits the backfill (once every task is done) and returns a JSON-able summary; raises
    :class:`GateFailedError` (with the report) when a gate fails. Of a published backfill it
    returns the summary of the audit it was published on, without auditing again."""
    bf = _open(backfill_id, project, ledger)
    try:
        rec = bf.ledger.backfill(backfill_id)
        if rec.status is BackfillState.PUBLISHED:
            log.info("backfill %s is already published; returning its recorded audit", backfill_id)
            return _audit_summary(bf, published=True)
        if rec.status is BackfillState.CANCELLED:  # nothing of it is to be published
            raise BackfillCancelledError(
                f"backfill {backfill_id} was cancelled by {rec.cancelled_by} "
                f"({rec.cancel_reason!r}); not auditing it (its audit area stays until "
                f"backfill discard {backfill_id})"
            )
        _finish_if_complete(bf)
        report = bf.audit(gates)
        log.info("%s", report)
        summary = _audit_summary(bf, published=False)
        if not report.passed:
            raise GateFailedError(
                f"{report}\nfix the backfill, or publish it by hand with "
                f"force_reason: backfill publish {backfill_id} --force REASON"
            )
        return summary
    finally:
        bf.engine.close()


def _audit_summary(bf: Backfill, *, published: bool) -> dict[str, Any]:
    rows = latest_audit(bf.ledger, bf.id)
    models = {}
    for r in rows:
        res = r.result
        models[r.model] = {
            "partitions": res["partitions_total"],
            "differing": res["partitions_differing"],
            "rows_changed": res["rows_changed"],
            "rows_added": res["rows_added"],
            "rows_removed": res["rows_removed"],
            "changed_columns": res["changed_columns"],
            "passed": r.passed,
        }
    gates = [g for r in rows for g in r.result["gates"]]
    return {
        "backfill_id": bf.id,
        "audit_id": rows[0].audit_id,
        "passed": all(g["passed"] for g in gates),
        "published": published,
        "models": models,
        "failed_gates": [g for g in gates if not g["passed"]],
    }


def publish(
    backfill_id: str,
    note: str,
    *,
    force_reason: str | None = None,
    project: Project | str | Path | None = None,
    ledger: LedgerBackend | str | Path | None = None,
) -> dict[str, Any]:
    """Publishes the audited backfill; returns the publication as a dict. Publishing an already
    published backfill is a no-op returning the recorded publication."""
    bf = _open(backfill_id, project, ledger)
    try:
        recorded = recorded_publication(bf.ledger, backfill_id)
        if recorded is not None:
            log.info("backfill %s is already published; nothing to do", backfill_id)
            return {**recorded, "already_published": True}
        return bf.publish(note, force_reason=force_reason).to_dict()
    finally:
        bf.engine.close()


def rollback(
    publication_id: str,
    note: str,
    *,
    force_reason: str | None = None,
    project: Project | str | Path | None = None,
    ledger: LedgerBackend | str | Path | None = None,
) -> dict[str, Any]:
    """Takes the publication ``publication_id`` back (see :mod:`backfill.publish.rollback`);
    returns the rollback as a dict. A task retried after its rollback committed finds the
    publication rolled back: it returns that rollback (``already_rolled_back``) instead of
    failing, so a retry of the Airflow task is safe."""
    proj = _load(project)
    led = _ledger(proj, ledger)
    engine = engine_for(proj)
    reconcile(proj, led, engine)  # a try that died between the warehouse and the ledger
    kept = led.kept_version(publication_id)
    if kept.rolled_back_by is not None:
        log.info("%s is already rolled back by %s", publication_id, kept.rolled_back_by)
        by = led.kept_version(kept.rolled_back_by)
        return {
            "id": by.publication_id,
            "rolls_back": publication_id,
            "rolled_back_at": by.published_at,
            "keep_until": by.keep_until,
            "already_rolled_back": True,
        }
    return rollback_publication(proj, led, engine, publication_id, note, force_reason).to_dict()
