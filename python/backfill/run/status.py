"""Where a backfill stands (``BackfillStatus``: per model counts, failed tasks) and the progress
events a run emits (``TaskEvent``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
from dataclasses import dataclass, field
from typing import Any

from .._arrow import html_table
from ..windows import format_duration
from .ledger import AttemptRecord, BackfillState, LedgerBackend, TaskRow, TaskState
from .ledger.states import PAUSABLE
from .limits import RunLimits, spent_seconds

__all__ = ["BackfillStatus", "ModelStatus", "TaskEvent", "backfill_status"]


@dataclass(frozen=True)
class TaskEvent:
    """A progress event: a task started, finished, was retried or failed."""

    kind: str  # started | done | retry | failed | lost
    model: str
    label: str
    task_id: int
    attempt: int
    seconds: float = 0.0
    rows: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class ModelStatus:
    model: str
    total: int
    done: int
    running: int
    failed: int
    pending: int
    blocked: int  # pending behind a failed task


@dataclass(frozen=True)
class BackfillStatus:
    """Where a backfill stands: per model counts and the failed tasks with their errors."""

    id: str
    status: str
    reason: str
    selection: str
    period: str
    mode: str
    models: list[ModelStatus]
    failed_tasks: list[TaskRow] = field(default_factory=list)
    #: paused / cancelled / waiting for a window / out of budget, said for people
    note: str | None = None
    paused: bool = False
    #: why no task of it runs now although some are left: "paused", "cancelled", "window" (no
    #: window has room now), "budget" (no room left in it) or "interrupted" (its runner was
    #: stopped by SIGINT/SIGTERM: resume it); None otherwise
    held: str | None = None
    #: engine time: budget, spent, remaining (seconds; budget None when there is none)
    budget: dict[str, float | None] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(m.total for m in self.models)

    @property
    def done(self) -> int:
        return sum(m.done for m in self.models)

    @property
    def ok(self) -> bool:
        return self.status in (BackfillState.DONE, BackfillState.PUBLISHED)

    @property
    def finished(self) -> bool:
        """No task can run any more: all done, or the rest failed or blocked."""
        return all(m.running == 0 and m.pending == m.blocked for m in self.models)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "reason": self.reason,
            "selection": self.selection,
            "period": self.period,
            "mode": self.mode,
            "tasks": {"total": self.total, "done": self.done},
            "paused": self.paused,
            "held": self.held,
            "note": self.note,
            "budget": self.budget,
            "models": [dataclasses.asdict(m) for m in self.models],
            "failed_tasks": [
                {
                    "task_id": t.task_id,
                    "model": t.model,
                    "label": t.label,
                    "attempts": t.attempts,
                    "error": t.error,
                }
                for t in self.failed_tasks
            ],
        }

    def _rows(self) -> list[list[Any]]:
        return [
            [m.model, m.total, m.done, m.running, m.failed, m.pending - m.blocked, m.blocked]
            for m in self.models
        ]

    _COLUMNS = ("model", "tasks", "done", "running", "failed", "pending", "blocked")

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        import pyarrow as pa  # type: ignore[import-untyped]

        rows = self._rows()
        table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(self._COLUMNS)})
        return table.__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        import pandas as pd  # type: ignore[import-untyped]

        return pd.DataFrame(self._rows(), columns=self._COLUMNS)

    def __str__(self) -> str:
        head = (
            f"backfill {self.id} [{self.status}] {self.selection} {self.period} "
            f"({self.mode}): {self.done}/{self.total} tasks done"
        )
        if self.status == "interrupted":
            head += f"; no worker is running it: backfill run --resume {self.id}"
        if self.note:
            head += f"\n  {self.note}"
        if self.budget.get("budget") is not None:
            b, spent = self.budget["budget"] or 0.0, self.budget["spent"] or 0.0
            head += (
                f"\n  budget: {format_duration(spent)} of {format_duration(b)} engine "
                f"time spent, {format_duration(max(0.0, b - spent))} remaining"
            )
        width = max([5, *(len(m.model) for m in self.models)])
        lines = [
            head,
            f"  {'model':<{width}}  {'done':>6}  {'running':>7}  {'failed':>6}  "
            f"{'pending':>7}  {'blocked':>7}",
        ]
        for m in self.models:
            lines.append(
                f"  {m.model:<{width}}  {m.done:>3}/{m.total:<3}{m.running:>8}  "
                f"{m.failed:>6}  {m.pending - m.blocked:>7}  {m.blocked:>7}"
            )
        for t in self.failed_tasks[:20]:
            lines.append(f"  FAILED {t.model} {t.label} after {t.attempts} attempt(s): {t.error}")
        if len(self.failed_tasks) > 20:
            lines.append(f"  ... and {len(self.failed_tasks) - 20} more failed tasks")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<BackfillStatus {self.id} {self.status}: {self.done}/{self.total} tasks done>"

    def _repr_html_(self) -> str | None:
        if len(self.models) > 200:
            return None
        e = html.escape
        rows = [[str(v) for v in r] for r in self._rows()]
        failed = "".join(
            f"<li><code>{e(t.model)} {e(t.label)}</code>: {e(str(t.error))}</li>"
            for t in self.failed_tasks[:50]
        )
        return (
            f"<div><p><b>backfill {e(self.id)}</b> [{e(self.status)}] "
            f"<code>{e(self.selection)}</code> {e(self.period)}: {self.done}/{self.total} "
            f"tasks done</p>{html_table(self._COLUMNS, rows)}"
            + (f"<ul>{failed}</ul>" if failed else "")
            + "</div>"
        )


def _blocked(tasks: list[TaskRow]) -> set[int]:
    """Pending tasks with a failed task among their (transitive) dependencies."""
    by_id = {t.task_id: t for t in tasks}
    memo: dict[int, bool] = {}
    for t in sorted(tasks, key=lambda t: t.wave):  # dependencies sit in earlier waves
        memo[t.task_id] = any(
            by_id[d].status is TaskState.FAILED or memo.get(d, False) for d in t.depends_on
        )
    return {t.task_id for t in tasks if t.status is TaskState.PENDING and memo[t.task_id]}


def _costs(
    options: dict[str, Any], tasks: list[TaskRow], attempts: list[AttemptRecord], blocked: set[int]
) -> tuple[RunLimits, list[float]]:
    """The run limits and the estimated costs of the pending tasks that may still run."""
    limits = RunLimits.from_options(options)
    per = limits.per_partition(attempts, {t.task_id: t for t in tasks})
    return limits, [
        limits.cost(t, per)
        for t in tasks
        if t.status is TaskState.PENDING and t.task_id not in blocked
    ]


def backfill_status(
    ledger: LedgerBackend, backfill_id: str, now: dt.datetime | None = None
) -> BackfillStatus:
    rec = ledger.backfill(backfill_id)
    tasks = ledger.tasks(backfill_id)
    blocked = _blocked(tasks)
    order: dict[str, list[TaskRow]] = {}
    for t in tasks:
        order.setdefault(t.model, []).append(t)
    models = []
    for name, ts in order.items():
        count = {s.value: sum(1 for t in ts if t.status is s) for s in TaskState}
        models.append(
            ModelStatus(
                name,
                len(ts),
                count["done"],
                count["running"],
                count["failed"],
                count["pending"],
                sum(1 for t in ts if t.task_id in blocked),
            )
        )
    status = rec.status.value  # or what holds it: paused, budget, window, interrupted
    live = ledger.live_workers(backfill_id)
    options = rec.options
    attempts = ledger.attempts(backfill_id)
    spent = spent_seconds(attempts)
    budget = options.get("budget_seconds")
    note: str | None = None
    held: str | None = None
    if rec.status is BackfillState.CANCELLED:
        note = f"cancelled by {rec.cancelled_by}: {rec.cancel_reason}"
        held = "cancelled"
    elif rec.paused and rec.status in PAUSABLE:
        status, held = "paused", "paused"
        note = (
            f"paused by {rec.paused_by} at {str(rec.paused_at)[:19]}; running "
            f"tasks finish, nothing new starts: backfill resume {backfill_id}"
        )
    elif (
        rec.status in (BackfillState.PENDING, BackfillState.RUNNING)
        and not live
        and (options.get("windows") or budget is not None)
    ):
        limits, costs = _costs(options, tasks, attempts, blocked)
        if (
            costs
            and budget is not None
            and rec.status is BackfillState.RUNNING
            and min(costs) > budget - spent
        ):
            held = "budget"
            note = (
                f"stopped within its budget ({format_duration(spent)} of "
                f"{format_duration(budget)} spent): raise it with backfill run --resume "
                f"{backfill_id} --budget ..."
            )
        elif costs and limits.windows is not None:
            note = limits.waiting_note(now or dt.datetime.now(dt.timezone.utc), min(costs))
            held = "window" if note else None
    elif rec.status is BackfillState.INTERRUPTED:
        held = "interrupted"
        note = (
            f"interrupted at {str(rec.updated_at)[:19]} UTC: its runner was stopped "
            "(SIGINT/SIGTERM) before the end; finished tasks are kept, interrupted ones "
            "committed nothing"
        )
    if rec.status is BackfillState.RUNNING and not live and note is None:
        status = "interrupted"  # no worker alive (killed): resume it
    return BackfillStatus(
        id=backfill_id,
        status=status,
        reason=rec.reason,
        selection=rec.selection,
        period=f"{rec.start[:10]}..{rec.end[:10]}",
        mode=rec.mode,
        models=models,
        failed_tasks=[t for t in tasks if t.status is TaskState.FAILED],
        note=note,
        paused=rec.paused,
        held=held,
        budget={
            "budget": budget,
            "spent": spent,
            "remaining": None if budget is None else max(0.0, budget - spent),
        },
    )
