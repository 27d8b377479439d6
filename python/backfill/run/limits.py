"""What bounds a run besides its tasks: run windows, an engine-time budget, and the clock.

>>> limits = RunLimits.from_options({"windows": ["22:00-06:00 Europe/Berlin"],
...                                  "budget_seconds": 10800, "costs": {"fct_daily_sales": 40}})
>>> limits.held_back(task, per_partition, committed, now=clock.now())    # doctest: +SKIP

A task's estimated cost is its partitions times its model's seconds per partition: the mean of
the model's finished attempts in this backfill once there are some (the real cost on this
engine, now), else the recorded estimate (``costs``, from ``backfill estimate``'s sample run).
A task fits when it ends before the open window closes, and when the engine time spent (every
finished attempt, failed ones too: the engine ran them) plus the estimates of the tasks running
now plus its own stays within the budget. Each worker checks before each claim; with several
workers, each may start one task on the same remainder, so the overshoot is at most one task per
worker.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..errors import InvalidInputError
from ..windows import Windows, format_duration
from .ledger import AttemptRecord, AttemptState, TaskRow
from .ledger.states import ENDED_ATTEMPTS

__all__ = ["Clock", "RunLimits", "SystemClock", "spent_seconds"]

Blocked = Literal["window", "budget"]


class Clock(Protocol):
    """Where a runner reads the time and waits (tests pass one they move by hand)."""

    def now(self) -> dt.datetime: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def spent_seconds(attempts: Sequence[AttemptRecord]) -> float:
    """Engine time the backfill's finished attempts used (what the ledger recorded)."""
    return float(sum(a.seconds or 0.0 for a in attempts if a.status in ENDED_ATTEMPTS))


@dataclass(frozen=True)
class RunLimits:
    windows: Windows | None = None
    budget_seconds: float | None = None
    costs: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None) -> RunLimits:
        o = dict(options or {})
        specs = o.get("windows")
        return cls(
            Windows.parse(specs) if specs else None,
            o.get("budget_seconds"),
            {str(k): float(v) for k, v in (o.get("costs") or {}).items()},
        )

    @property
    def bound(self) -> bool:
        return self.windows is not None or self.budget_seconds is not None

    def per_partition(
        self, attempts: Sequence[AttemptRecord], tasks: Mapping[int, TaskRow]
    ) -> dict[str, float]:
        """Seconds per partition by model: observed in this backfill, else recorded."""
        seen: dict[str, list[float]] = {}
        for a in attempts:
            t = tasks.get(a.task_id)
            if a.status is AttemptState.DONE and a.seconds is not None and t is not None:
                seen.setdefault(t.model, []).append(float(a.seconds) / max(1, t.partitions))
        out = dict(self.costs)
        out.update({m: sum(v) / len(v) for m, v in seen.items()})
        return out

    @staticmethod
    def cost(task: TaskRow, per_partition: Mapping[str, float]) -> float:
        return per_partition.get(task.model, 0.0) * task.partitions

    def held_back(
        self, task: TaskRow, per_partition: Mapping[str, float], committed: float, now: dt.datetime
    ) -> Blocked | None:
        """Why ``task`` may not start now (None: it may). ``committed``: engine time spent
        plus the estimates of the tasks running now."""
        cost = self.cost(task, per_partition)
        if self.budget_seconds is not None and committed + cost > self.budget_seconds:
            return "budget"
        if self.windows is not None:
            closes = self.windows.open_at(now)
            if closes is None or now + dt.timedelta(seconds=cost) > closes:
                return "window"
        return None

    def refuse_over_budget(self, estimate: float, force_reason: str | None) -> None:
        """Before a run: InvalidInputError when ``estimate`` (seconds of engine time) exceeds
        the budget, unless forced with a reason."""
        if self.budget_seconds is None or estimate <= self.budget_seconds:
            return
        if force_reason is not None and force_reason.strip():
            return
        raise InvalidInputError(
            f"the plan's estimate, {format_duration(estimate)} of engine time, exceeds the "
            f"budget of {format_duration(self.budget_seconds)}; raise the budget, narrow the "
            "plan, or run anyway with --force REASON"
        )

    def next_start(self, now: dt.datetime, cost: float = 0.0) -> dt.datetime | None:
        """When a task of ``cost`` seconds may next start inside a window: None when it may
        now (or there are no windows); else the next opening (after the open window closes, when
        the task does not fit in what is left of it)."""
        if self.windows is None:
            return None
        closes = self.windows.open_at(now)
        if closes is None:
            return self.windows.next_open(now)
        return (
            None if now + dt.timedelta(seconds=cost) <= closes else self.windows.next_open(closes)
        )

    def waiting_note(self, now: dt.datetime, cost: float = 0.0) -> str | None:
        """``waiting for window, opens 22:00 CET`` while no window has room for a task of
        ``cost`` seconds."""
        opens = self.next_start(now, cost)
        if opens is None or self.windows is None:
            return None
        return f"waiting for window, opens {self.windows.describe_open(opens, now)}"
