"""What a model's tasks cost, and where that figure came from; automatic batching from it.

>>> cost = fit_cost("fct", [Measurement(1, 0.021, 120, "run", False)] * 89)
>>> str(cost)
'measured: 89 runs, median 21 ms'
>>> auto_partitions_per_run(89, cost, concurrency=2, min_task_seconds=2.0)  # 1.9 s: 1 task
89
>>> auto_partitions_per_run(890, cost, concurrency=2, min_task_seconds=2.0)  # 96 x 21 ms >= 2 s
96

A task of ``k`` partitions of a model costs ``per_task + k * per_partition`` seconds: a fixed
part (starting the query, the transaction, the fingerprint) and a part that grows with the
period. Measurements come from the ledger (every attempt's duration) or from the sample runs of
``backfill estimate``; the fit is per model, over the tasks measured with the model's current SQL
when there are any (older ones are used, and marked stale, otherwise).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

__all__ = [
    "DEFAULT_MIN_TASK_SECONDS",
    "MAX_FIXED_SHARE",
    "UNCOSTED_MAX_PARTITIONS",
    "Measurement",
    "ModelCost",
    "auto_partitions_per_run",
    "cost_summary",
    "fit_cost",
    "format_duration",
    "format_seconds",
    "overhead_hint",
    "slot_cap",
]

#: ``partitions_per_run="auto"``: each task carries at least this many seconds of measured work
#: (backfill.yml ``batching: {min_task: 2s}``, ``--min-task``), so that the fixed cost of a task
#: (a query, a transaction, a ledger round trip: tens of milliseconds) stays small beside it.
DEFAULT_MIN_TASK_SECONDS = 2.0
#: ``partitions_per_run="auto"``: a task's fixed cost is at most this share of its time, so an
#: engine whose every task costs seconds before any work (a Spark job: planning, code generation,
#: the commit) gets tasks large enough to pay for it, where min_task alone would give it one
#: partition each (its fixed cost already exceeds min_task).
MAX_FIXED_SHARE = 0.1
#: ``partitions_per_run="auto"`` without cost data: one task per concurrency slot, but at most
#: this many partitions in one task (a month of days), so that a first, unmeasured run of a heavy
#: model neither holds one enormous transaction nor loses much work to a retry.
UNCOSTED_MAX_PARTITIONS = 31
#: Most recent measurements per model that the fit reads.
_MAX_MEASUREMENTS = 2000

CostSource = Literal["measured", "sample", "given", "none"]


class Measurement(NamedTuple):
    """One measured task: how many partitions it wrote, its seconds, rows (None: unknown), where
    it came from (``"run"``: an attempt of a backfill; ``"sample"``: ``backfill estimate``) and
    whether the model's SQL has changed since (``stale``)."""

    partitions: int
    seconds: float
    rows: int | None
    source: str
    stale: bool


def format_seconds(seconds: float) -> str:
    """``21840`` -> ``"6 h 4 m"``; short spans keep seconds."""
    s = round(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    parts = [f"{v} {u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m")) if v]
    if s and not days and not hours:
        parts.append(f"{s} s")
    return " ".join(parts[:2]) if parts else "0 s"


def format_duration(seconds: float) -> str:
    """``0.021`` -> ``"21 ms"``, ``2.5`` -> ``"2.50 s"``, ``95`` -> ``"1 m 35 s"``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m} m" if h else f"{m} m {s} s"


@dataclass(frozen=True)
class ModelCost:
    """The cost model of one model's tasks and its provenance (``source``)."""

    model: str
    source: CostSource
    per_partition: float = 0.0  # seconds per partition
    per_task: float = 0.0  # fixed seconds per task
    runs: int = 0  # measurements the fit used
    median_seconds: float | None = None  # of one measured task
    median_partitions: float = 1.0  # partitions of a measured task (median)
    rows_per_partition: float | None = None  # of the measured tasks, when recorded
    stale: bool = False  # measured with SQL other than the model's current SQL

    @property
    def known(self) -> bool:
        return self.source != "none"

    def task_seconds(self, partitions: int) -> float:
        """The estimated seconds of one task of ``partitions`` partitions."""
        return self.per_task + self.per_partition * partitions

    def __str__(self) -> str:
        if self.source == "none":
            return "no cost data: run `backfill estimate`"
        if self.source == "given":
            return f"given: {format_duration(self.per_partition)} per partition"
        assert self.median_seconds is not None
        parts = self.median_partitions
        each = "" if parts == 1 else f" ({parts:g} partitions each)"
        if self.source == "sample":
            text = f"sample run: {format_duration(self.median_seconds)}{each}"
            if self.runs > 1:
                text = (
                    f"sample runs: {self.runs}, median {format_duration(self.median_seconds)}{each}"
                )
        else:
            text = (
                f"measured: {self.runs} run{'' if self.runs == 1 else 's'}, median "
                f"{format_duration(self.median_seconds)}{each}"
            )
        return text + ("; stale: the model's SQL changed since" if self.stale else "")

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "description": str(self),
            "seconds_per_partition": self.per_partition if self.known else None,
            "seconds_per_task": self.per_task if self.known else None,
            "runs": self.runs,
            "median_seconds": self.median_seconds,
            "median_partitions": self.median_partitions,
            "rows_per_partition": self.rows_per_partition,
            "stale": self.stale,
        }


def fit_cost(
    model: str, measurements: Sequence[Measurement], overhead_hint: float | None = None
) -> ModelCost:
    """The cost model of ``model`` from its measurements (newest first).

    Runs of backfills win over sample runs, and measurements with the current SQL over stale
    ones. With tasks of clearly different sizes (the largest at least 1.5 times the smallest),
    a weighted least-squares line through the median seconds per size separates the fixed cost
    per task from the cost per partition; with one size only, ``overhead_hint`` (a fixed cost
    per task learnt from other models of the same project) is taken as the fixed part, else the
    cost is taken to grow with the partitions alone. O(n log n) for n measurements."""
    if not measurements:
        return ModelCost(model, "none")
    fresh = [m for m in measurements if not m.stale]
    use = fresh or list(measurements)
    runs = [m for m in use if m.source == "run"]
    points = (runs or use)[:_MAX_MEASUREMENTS]
    source: CostSource = "measured" if runs else "sample"
    by_size: dict[int, list[float]] = {}
    for m in points:
        by_size.setdefault(max(1, int(m.partitions)), []).append(max(0.0, float(m.seconds)))
    median_t = statistics.median(m.seconds for m in points)
    median_k = statistics.median(max(1, m.partitions) for m in points)
    per_task, per_partition = _fit_line(by_size, median_t, median_k, overhead_hint)
    rows = [(m.rows, m.partitions) for m in points if m.rows is not None and m.partitions > 0]
    rpp = sum(r for r, _ in rows) / sum(k for _, k in rows) if rows else None
    return ModelCost(
        model,
        source,
        per_partition,
        per_task,
        len(points),
        median_t,
        float(median_k),
        rpp,
        stale=not fresh,
    )


def _fit_line(
    by_size: dict[int, list[float]], median_t: float, median_k: float, hint: float | None
) -> tuple[float, float]:
    sizes = sorted(by_size)
    if len(sizes) >= 2 and sizes[-1] >= 1.5 * sizes[0]:
        pts = [(k, statistics.median(ts), len(ts)) for k, ts in by_size.items()]
        w = sum(n for _, _, n in pts)
        kbar = sum(k * n for k, _, n in pts) / w
        tbar = sum(t * n for _, t, n in pts) / w
        var = sum(n * (k - kbar) ** 2 for k, _, n in pts)
        slope = sum(n * (k - kbar) * (t - tbar) for k, t, n in pts) / var
        if slope >= 0 and tbar - slope * kbar >= 0:
            return tbar - slope * kbar, slope
        if slope < 0:  # bigger tasks were not slower: the fixed part is all there is
            return tbar, 0.0
        return 0.0, tbar / kbar  # a negative intercept: no fixed part to speak of
    fixed = min(max(hint or 0.0, 0.0), median_t)
    return fixed, (median_t - fixed) / median_k


def overhead_hint(costs: Sequence[ModelCost]) -> float | None:
    """The median fixed cost per task among models whose fit separated it (None: none did)."""
    found = [c.per_task for c in costs if c.known and c.per_task > 0 and c.per_partition > 0]
    return statistics.median(found) if found else None


def slot_cap(partitions: int, concurrency: int) -> int:
    """The most partitions per task that still gives every one of ``concurrency`` slots a task
    (when there are that many partitions): even batches, one per slot, when that gives enough
    of them (4 partitions over 3 slots: 2 + 2 does not; 1 + 1 + 1 + 1 does)."""
    slots = min(max(1, partitions), max(1, concurrency))
    per_slot = math.ceil(partitions / slots)
    if math.ceil(partitions / per_slot) < slots:
        per_slot = max(1, partitions // slots)
    return max(1, per_slot)


def auto_partitions_per_run(
    partitions: int,
    cost: ModelCost | None,
    *,
    concurrency: int,
    min_task_seconds: float,
    batchable: bool = True,
) -> int:
    """How many consecutive partitions of a model one task takes under ``"auto"``.

    * Enough partitions that a task carries ``min_task_seconds`` of measured work: with the
      model's cost ``a + b * k`` for ``k`` partitions, the least ``k`` with ``a + b * k`` at
      least ``min_task_seconds`` and the fixed part ``a`` at most :data:`MAX_FIXED_SHARE` of
      it (1 when one partition already satisfies both).
    * A model whose whole period is estimated at most ``min_task_seconds`` is one task.
    * Otherwise never fewer tasks than ``concurrency`` slots can run at once (when the model has
      that many partitions): at most ``ceil(partitions / concurrency)`` per task (``floor`` where
      ``ceil`` would leave a slot without a task).
    * Without cost data: one task per slot, at most :data:`UNCOSTED_MAX_PARTITIONS` partitions.
    * ``batchable=False`` (an engine that cannot write several partitions in one transaction):
      always 1. Tasks never span a gap between runs of partitions (the planner's rule)."""
    if not batchable or partitions <= 1:
        return 1
    per_slot = slot_cap(partitions, concurrency)
    if cost is None or not cost.known:
        return max(1, min(per_slot, UNCOSTED_MAX_PARTITIONS))
    if cost.task_seconds(partitions) <= min_task_seconds:
        return partitions  # the whole period is less than one task's worth: splitting it for
        # idle slots would only add tasks' fixed costs (embedded engines share the cores, too)
    if cost.per_partition <= 0:
        by_work = partitions  # all fixed cost: fewer tasks are simply cheaper
    else:
        work = max(
            min_task_seconds - cost.per_task,
            cost.per_task * (1 - MAX_FIXED_SHARE) / MAX_FIXED_SHARE,
        )
        # A subnormal per-partition cost makes the ratio infinite: no task needs more than all
        # the partitions, so compare before rounding. The ratio is rounded up less a relative
        # 1e-12: (1 - 0.1) / 0.1 is 9.000000000000002 in floats, and an exact 9 partitions must
        # not become 10.
        ratio = max(0.0, work) / cost.per_partition
        by_work = partitions if ratio >= partitions else math.ceil(ratio * (1 - 1e-12))
    return max(1, min(by_work, per_slot))


def cost_summary(
    batching: str | int,
    min_task_seconds: float | None,
    models: Sequence[Any],
    costs: Mapping[str, ModelCost],
) -> list[str]:
    """The lines of ``Plan.describe`` saying how tasks were batched and where each planned
    model's cost came from."""
    if batching == "auto":
        floor = "" if min_task_seconds is None else f"at least {format_duration(min_task_seconds)}"
        lines = [
            f"batching: auto (tasks of {floor or 'enough'} measured work, or one task for "
            "a model with less in all; never fewer tasks than the concurrency otherwise; "
            f"without cost data one task per concurrent slot, at most "
            f"{UNCOSTED_MAX_PARTITIONS} partitions)"
        ]
    else:
        lines = [f"batching: {batching} partition{'' if batching == 1 else 's'} per task"]
    width = max([0, *(len(m.model) for m in models)])
    lines.extend(f"cost of {m.model:<{width}}  {costs[m.model]}" for m in models)
    return lines
