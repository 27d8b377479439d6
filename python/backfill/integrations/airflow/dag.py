"""``backfill_dag``: the Airflow 3 DAG of a backfill (plan -> run per model -> audit ->
[approve] -> publish), built from the plain functions of :mod:`backfill.integrations.airflow`.

Shape (one task per box; ``run_<model>`` is a mapped task, one instance per backfill task)::

    plan -> run_<model> (mapped, per model, upstream = its selected parents) -> audit
         -> approve (optional, Airflow's HITL ApprovalOperator) -> publish

Tasks of one model never depend on each other (only on their parents' tasks), so one mapped
task per model with the parents' mapped tasks upstream keeps the order of the plan exactly
while the DAG stays as small as the selection: independent branches run side by side. The
models are resolved when the DAG file is parsed (a selection does not depend on the period);
the tasks when the ``plan`` task runs. A model with no task in the period expands to nothing
(skipped), which its downstream tasks tolerate (``none_failed``).

Failures: a permanent failure (SQL error, a gate failed) fails the task at once
(``AirflowFailException``) with our message; a transient one (a lock, a lost lease, a task held
by another live worker) raises so that Airflow retries it after ``retry_delay``.

Pause and cancel (``backfill pause|resume|cancel ID``, from any process): a mapped task of a
paused backfill is rescheduled (``AirflowRescheduleException``: up_for_reschedule, then tried
again; no retry is used up) until the backfill is resumed; a cancelled backfill's tasks, audit
and publish are skipped (``AirflowSkipException`` with who cancelled it and why).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..._extras import extra_required
from ...api import Project
from ...engines import TaskFailure
from ...errors import BackfillError, InvalidInputError
from ...run.ledger import BackfillCancelledError, BackfillPausedError
from . import tasks as bfa

if TYPE_CHECKING:  # pragma: no cover
    from airflow.sdk import DAG

log = logging.getLogger(__name__)

__all__ = ["backfill_dag"]

_TASK_ID = re.compile(r"[^A-Za-z0-9_.-]")
LABEL_KEY = "backfill_partition"  # context key rendered by map_index_template


def _group_id(model: str) -> str:
    return _TASK_ID.sub("_", model)


def _fail(exc: BaseException, recheck: dt.timedelta = dt.timedelta(minutes=1)) -> BaseException:
    """Our error as Airflow should see it: permanent ones fail without retries; a paused
    backfill's task is rescheduled (``recheck`` from now; it frees its worker slot meanwhile and
    uses no retry); a cancelled backfill's task is skipped with the reason."""
    # Airflow is optional (extra backfill[airflow]): imported only where a DAG needs it.
    from airflow.sdk.exceptions import (
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSkipException,
    )

    if isinstance(exc, TaskFailure) and exc.transient:
        return exc
    # mypy does not follow Airflow's sources (see pyproject.toml): its classes are Any to it.
    airflow_exc: BaseException
    if isinstance(exc, BackfillPausedError):
        log.info("%s; checking again in %s", exc, recheck)
        airflow_exc = AirflowRescheduleException(dt.datetime.now(dt.timezone.utc) + recheck)
    elif isinstance(exc, BackfillCancelledError):
        airflow_exc = AirflowSkipException(str(exc))
    else:
        airflow_exc = AirflowFailException(str(exc))
    return airflow_exc


# The public keyword API (the CLI's options, as Airflow's own DAG and operators take theirs):
# users name what they set. The values are gathered into one _DagSpec at once, which the tasks
# read, so the rule's concern (one function doing many things with many inputs) does not apply.
def backfill_dag(  # noqa: PLR0913
    dag_id: str,
    project: str | Path,
    select: str,
    start: dt.date | dt.datetime | str,
    end: dt.date | dt.datetime | str,
    *,
    concurrency: int,
    reason: str,
    note: str | None = None,
    approval: bool | Mapping[str, Any] = False,
    exclude: str | None = None,
    as_of: dt.date | dt.datetime | str | None = None,
    tz: str | None = None,
    propagate: Literal["impact", "clip"] = "impact",
    partitions_per_run: int = 1,
    allow_append: bool = False,
    gates: Mapping[str, Any] | None = None,
    ledger: str | None = None,
    retries: int = 2,
    retry_delay: dt.timedelta = dt.timedelta(seconds=30),
    lease_seconds: float = 60.0,
    tags: Sequence[str] = ("backfill",),
    paused_recheck: dt.timedelta = dt.timedelta(minutes=1),
    **dag_kwargs: Any,
) -> DAG:
    """The DAG that plans, runs, audits and publishes one backfill of ``project`` (a project
    directory every worker can read).

    ``concurrency`` caps the task instances running at once (``max_active_tasks`` of the DAG and
    ``max_active_tis_per_dagrun`` of each mapped task). ``note`` is the consumers' changelog
    note (default: the reason). ``approval=True`` (or a dict of ``ApprovalOperator`` arguments
    such as ``assigned_users``, ``notifiers``, ``response_timeout``) puts Airflow's
    human-in-the-loop ``ApprovalOperator`` between audit and publish: a reviewer reads the audit
    summary under Required Actions and approves (publish runs) or rejects (publish is skipped;
    the audit area stays for ``backfill discard``). ``retries``/``retry_delay`` apply to every
    task; transient failures use them, permanent ones fail at once. While the backfill is
    paused (``backfill pause ID``) its mapped tasks are rescheduled every ``paused_recheck``
    (Airflow's up_for_reschedule: no retry used, no worker slot held) until ``backfill resume
    ID``; once it is cancelled they, the audit and publish are skipped with the reason.
    ``dag_kwargs`` go to ``DAG`` (``schedule`` defaults to None: trigger it by hand)."""
    # Airflow is optional (extra backfill[airflow]): importing this module must not need it.
    with extra_required("backfill_dag (an Airflow DAG)", "airflow"):
        from airflow.sdk import DAG

    _check_arguments(concurrency, reason, approval)
    root = str(Path(project).resolve())
    proj = Project.load(root)
    models = [m for m in proj.select(select, exclude) if m in proj.models]
    if not models:
        raise InvalidInputError(f"selection {select!r} matches no model of {proj.name!r}")
    spec = _DagSpec(
        root=root,
        select=select,
        start=start,
        end=end,
        reason=reason,
        note=note or reason,
        exclude=exclude,
        as_of=as_of,
        tz=tz,
        propagate=propagate,
        partitions_per_run=partitions_per_run,
        allow_append=allow_append,
        gates=gates,
        ledger=ledger,
        concurrency=concurrency,
        lease_seconds=lease_seconds,
        paused_recheck=paused_recheck,
    )
    dag_kwargs.setdefault("schedule", None)
    dag_kwargs.setdefault("catchup", False)
    dag_kwargs.setdefault("max_active_runs", 1)
    dag_kwargs.setdefault(
        "doc_md", f"Backfill of `{select}` in `{root}` for {start}..{end}: {reason}"
    )
    default_args = {
        "retries": retries,
        "retry_delay": retry_delay,
        **dag_kwargs.pop("default_args", {}),
    }
    with DAG(
        dag_id,
        max_active_tasks=concurrency,
        default_args=default_args,
        tags=list(tags),
        **dag_kwargs,
    ) as dag:
        audited, published = _add_tasks(spec, proj, models)
        if approval:
            options = approval if isinstance(approval, Mapping) else {}
            approve = _approve_task(dag_id, select, start, end, reason, options)
            audited >> approve >> published
        else:
            audited >> published
    # Airflow records the file that constructed the DAG as its location, which is this module;
    # workers must re-import the user's DAG file instead (the DAG processor sets the same).
    dag.fileloc = _caller_file()
    return dag


def _check_arguments(concurrency: object, reason: object, approval: object) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidInputError(f"concurrency {concurrency!r} is not a positive integer")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInputError("a backfill needs a reason, e.g. reason='discount bug fixed'")
    if not isinstance(approval, (bool, Mapping)):
        raise InvalidInputError(
            f"approval {approval!r}: expected True/False or a dict of ApprovalOperator arguments"
        )


@dataclasses.dataclass(frozen=True)
class _DagSpec:
    """Everything the DAG's tasks need, as plain values, so that workers rebuild it from the DAG
    file; one method per task, each turning our errors into what Airflow should see (_fail)."""

    root: str
    select: str
    start: dt.date | dt.datetime | str
    end: dt.date | dt.datetime | str
    reason: str
    note: str
    exclude: str | None
    as_of: dt.date | dt.datetime | str | None
    tz: str | None
    propagate: Literal["impact", "clip"]
    partitions_per_run: int
    allow_append: bool
    gates: Mapping[str, Any] | None
    ledger: str | None
    concurrency: int
    lease_seconds: float
    paused_recheck: dt.timedelta

    @property
    def where(self) -> dict[str, Any]:
        return {"project": self.root, "ledger": self.ledger}

    def plan(self, idempotency_key: str) -> str:
        try:
            return bfa.plan_backfill(
                self.root,
                self.select,
                self.start,
                self.end,
                reason=self.reason,
                exclude=self.exclude,
                as_of=self.as_of,
                tz=self.tz,
                propagate=self.propagate,
                partitions_per_run=self.partitions_per_run,
                allow_append=self.allow_append,
                idempotency_key=idempotency_key,
                ledger=self.ledger,
            )
        except BackfillError as exc:
            raise _fail(exc) from exc

    def task_ids(self, backfill_id: str, model: str) -> list[int]:
        ids = bfa.task_ids(backfill_id, model=model, **self.where)
        limit = _max_map_length()
        if len(ids) > limit:
            raise _fail(
                InvalidInputError(
                    f"{model} has {len(ids)} tasks, more than Airflow maps in one task "
                    f"([core] max_map_length = {limit}): raise partitions_per_run or "
                    "max_map_length"
                )
            )
        log.info("backfill %s: %s has %d task(s) to run", backfill_id, model, len(ids))
        return ids

    def run(self, ctx: Any, backfill_id: str, backfill_task: int) -> dict[str, Any]:
        try:
            loaded = Project.load(self.root)
            # The map index label in the UI: "<model> <partition>" instead of 0, 1, 2...
            ctx[LABEL_KEY] = bfa.task_label(
                backfill_id, backfill_task, project=loaded, ledger=self.ledger
            )
            return bfa.run_task(
                backfill_id,
                backfill_task,
                project=loaded,
                ledger=self.ledger,
                lease_seconds=self.lease_seconds,
            )
        except BackfillError as exc:
            raise _fail(exc, self.paused_recheck) from exc

    def audit(self, backfill_id: str) -> dict[str, Any]:
        try:
            return bfa.audit(backfill_id, gates=self.gates, **self.where)
        except BackfillError as exc:
            raise _fail(exc) from exc

    def publish(self, backfill_id: str) -> dict[str, Any]:
        try:
            return bfa.publish(backfill_id, self.note, **self.where)
        except BackfillError as exc:
            raise _fail(exc) from exc


def _add_tasks(spec: _DagSpec, proj: Project, models: list[str]) -> tuple[Any, Any]:
    """plan -> run_<model> (mapped; after its selected parents' runs) -> audit, and publish (not
    yet wired: the approval goes between); returns (audit, publish)."""
    from airflow.sdk import TaskGroup, get_current_context, task

    @task(task_id="plan")
    def plan() -> str:
        ctx = get_current_context()
        return spec.plan(f"{ctx['dag'].dag_id}/{ctx['run_id']}")

    @task(task_id="tasks")
    def tasks(backfill_id: str, model: str) -> list[int]:
        return spec.task_ids(backfill_id, model)

    @task(
        map_index_template="{{ " + LABEL_KEY + " }}",
        max_active_tis_per_dagrun=spec.concurrency,
        trigger_rule="none_failed",
    )
    def run(backfill_id: str, backfill_task: int) -> dict[str, Any]:
        return spec.run(get_current_context(), backfill_id, backfill_task)

    @task(task_id="audit", trigger_rule="none_failed")
    def audit(backfill_id: str) -> dict[str, Any]:
        return spec.audit(backfill_id)

    @task(task_id="publish")
    def publish(backfill_id: str) -> dict[str, Any]:
        return spec.publish(backfill_id)

    bid: Any = plan()  # an XComArg: the id at run time
    runs: dict[str, Any] = {}
    for m in models:  # topological order: parents first
        with TaskGroup(group_id=_group_id(m)):
            ids = tasks(bid, m)
            runs[m] = run.override(task_id="run").partial(backfill_id=bid).expand(backfill_task=ids)
        for parent in proj.models[m].parents:
            if parent in runs:
                runs[parent] >> runs[m]
    audited = audit(bid)
    for m in models:
        runs[m] >> audited
    return audited, publish(bid)


def _caller_file() -> str:
    """The first file up the stack outside the backfill package: the user's DAG file."""
    package = Path(__file__).resolve().parents[1]
    frame = sys._getframe(1)
    while frame.f_back is not None and Path(frame.f_code.co_filename).resolve().is_relative_to(
        package
    ):
        frame = frame.f_back
    return frame.f_code.co_filename


def _approve_task(
    dag_id: str, select: str, start: object, end: object, reason: str, options: Mapping[str, Any]
) -> Any:
    try:  # optional twice over: Airflow itself, and the HITL operator of Airflow 3.1+
        from airflow.providers.standard.operators.hitl import ApprovalOperator
    except ImportError as exc:  # pragma: no cover - the provider ships with Airflow 3.1+
        raise InvalidInputError(
            "approval=True needs Airflow's human-in-the-loop "
            "ApprovalOperator (apache-airflow-providers-standard with "
            f"Airflow 3.1+): {exc}"
        ) from exc
    kwargs: dict[str, Any] = {
        "task_id": "approve",
        "subject": f"Publish backfill of {select} ({start}..{end})?",
        "body": (
            f"**Reason:** {reason}\n\n**Audit** (backfill "
            "`{{ ti.xcom_pull(task_ids='audit')['backfill_id'] }}`):\n\n"
            "```\n{{ ti.xcom_pull(task_ids='audit') | tojson(indent=2) }}\n```\n\n"
            "Approve to publish; reject to leave the published tables as they are."
        ),
        **options,
    }
    return ApprovalOperator(**kwargs)


def _max_map_length() -> int:
    try:  # Airflow is optional; a worker with only the Task SDK has no configuration module
        from airflow.configuration import conf
    except ImportError:  # pragma: no cover - a Task-SDK-only worker: Airflow's default
        return 1024
    return int(conf.getint("core", "max_map_length", fallback=1024))
