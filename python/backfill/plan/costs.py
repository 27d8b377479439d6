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

Where tasks recorded the rows they wrote, the part that grows is per row: a task costs
``per_task + per_row * rows`` with ``rows`` the expected rows of its partitions -- what earlier
runs wrote for that same partition (on any engine: rows do not depend on it), else the model's
typical partition. A Black Friday with 20 times the rows of a typical day then costs 20 typical
days (:meth:`ModelCost.size_of`). Times are fitted only from the engine type that will run the
plan: another engine's times are never used (a Spark task's seconds say nothing of DuckDB's);
measurements older than the engine's record (before ledger schema 8) are the last resort, and
say so.

>>> m = [Measurement(1, 0.1 + 1e-5 * r, r, "run", False, "duckdb", {f"d{i}": r})
...      for i, r in enumerate([1000, 1000, 20000])]
>>> cost = fit_cost("fct", m, engine="duckdb")
>>> round(cost.task_seconds(1), 3), cost.size_of(["d2"]), cost.size_of(["new day"])
(0.11, 20.0, 1.0)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

__all__ = [
    "DEFAULT_MIN_TASK_SECONDS",
    "MAX_FIXED_SHARE",
    "MAX_SHARED_TASK_SECONDS",
    "UNCOSTED_MAX_PARTITIONS",
    "Measurement",
    "ModelCost",
    "auto_partitions_per_run",
    "cost_summary",
    "expected_rows",
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
#: ``partitions_per_run="auto"`` on an engine whose one task already uses every core
#: (``Capabilities.shared_cores``: DuckDB, Spark): a model's period goes to the fewest tasks of
#: at most this much measured work each, instead of one task per concurrent slot. Tasks side by
#: side there share the cores rather than add to them, so splitting a period only adds fixed
#: costs (measured on Spark/Iceberg, the shop at 4,000 orders a day over 90 days: its three
#: models as 9 tasks 7.0-7.6 s, 5 tasks 5.9-6.8 s, one task each 4.9-6.3 s); the bound keeps
#: what a failed task's retry repeats, and one transaction's size, to a few minutes of work.
MAX_SHARED_TASK_SECONDS = 300.0
#: Most recent measurements per model that the fit reads.
_MAX_MEASUREMENTS = 2000

CostSource = Literal["measured", "sample", "given", "none"]


class Measurement(NamedTuple):
    """One measured task: how many partitions it wrote, its seconds, rows (None: unknown), where
    it came from (``"run"``: an attempt of a backfill; ``"sample"``: ``backfill estimate``),
    whether the model's SQL has changed since (``stale``), the engine type that measured it
    (None: not recorded) and the rows of each partition it wrote, by label (None: unknown)."""

    partitions: int
    seconds: float
    rows: int | None
    source: str
    stale: bool
    engine: str | None = None
    partition_rows: Mapping[str, float] | None = None


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


def _per_row(seconds: float) -> str:
    """``1e-4`` -> ``"100 µs per row"``; a row of a small summary may take milliseconds."""
    if seconds >= 1e-3:
        return f"{format_duration(seconds)} per row"
    return f"{seconds * 1e6:.3g} µs per row"


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
    rows_per_partition: float | None = None  # of a typical partition, when recorded
    stale: bool = False  # measured with SQL other than the model's current SQL
    #: the engine type whose times these are (None: any; the caller named none)
    engine: str | None = None
    #: the times were measured before the ledger recorded engines (the last resort)
    engine_unrecorded: bool = False
    #: engine types whose history was left out (another engine's times)
    other_engines: tuple[str, ...] = ()
    #: seconds per row written, when the fit used rows (then per_partition is per_row times
    #: rows_per_partition)
    per_row: float | None = None
    #: label -> the rows earlier runs wrote for that partition (the newest measurement)
    rows_by_label: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )

    @property
    def known(self) -> bool:
        return self.source != "none"

    def task_seconds(self, partitions: int) -> float:
        """The estimated seconds of one task of ``partitions`` typical partitions."""
        return self.per_task + self.per_partition * partitions

    def size_of(self, labels: Sequence[str]) -> float:
        """How many typical partitions the work of a task writing the partitions ``labels``
        is: each partition's recorded rows over the typical partition's (a partition never
        recorded counts as typical); ``len(labels)`` when the cost is not per row."""
        typical = self.rows_per_partition
        if self.per_row is None or not self.rows_by_label or not typical:
            return float(len(labels))
        rows = self.rows_by_label
        return sum(rows.get(label, typical) for label in labels) / typical

    def _basis(self) -> str:
        """Where the figure came from beyond the runs: engine, rows."""
        parts = []
        if self.engine is not None:
            parts.append(
                "on an engine not recorded (older ledger)"
                if self.engine_unrecorded
                else f"on {self.engine}"
            )
        if self.per_row is not None and self.rows_per_partition:
            parts.append(
                f"{format_duration(self.per_task)} per task + {_per_row(self.per_row)}; "
                f"rows of {len(self.rows_by_label)} partitions recorded, typical "
                f"{self.rows_per_partition:,.0f}"
            )
        if self.other_engines:
            parts.append(f"not used: the times on {', '.join(self.other_engines)}")
        return "; ".join(parts)

    def __str__(self) -> str:
        if self.source == "none":
            if self.other_engines:
                return (
                    f"no cost data on {self.engine}: the history on "
                    f"{', '.join(self.other_engines)} is another engine's times; run "
                    "`backfill estimate`"
                )
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
        basis = self._basis()
        return (
            text
            + (f" {basis}" if basis.startswith("on ") else f"; {basis}" if basis else "")
            + ("; stale: the model's SQL changed since" if self.stale else "")
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "description": str(self),
            "seconds_per_partition": self.per_partition if self.known else None,
            "seconds_per_task": self.per_task if self.known else None,
            "seconds_per_row": self.per_row if self.known else None,
            "runs": self.runs,
            "median_seconds": self.median_seconds,
            "median_partitions": self.median_partitions,
            "rows_per_partition": self.rows_per_partition,
            "partitions_with_rows": len(self.rows_by_label),
            "engine": self.engine,
            "engine_unrecorded": self.engine_unrecorded,
            "other_engines": list(self.other_engines),
            "stale": self.stale,
        }


def expected_rows(measurements: Sequence[Measurement]) -> dict[str, float]:
    """label -> the rows the newest measurement of that partition wrote (with the model's
    current SQL where there is one, else the newest stale one), from measurements newest first
    of any engine: the rows a period holds do not depend on the engine that wrote them."""
    out: dict[str, float] = {}
    for stale in (False, True):
        for m in measurements:
            if m.stale == stale and m.partition_rows:
                for label, rows in m.partition_rows.items():
                    out.setdefault(label, float(rows))
    return out


def _timed_on(
    measurements: Sequence[Measurement], engine: str | None
) -> tuple[list[Measurement], bool, tuple[str, ...]]:
    """The measurements whose times may estimate a run on ``engine`` (None: all): that engine's,
    else those whose engine was not recorded (the last resort: flagged); and the other engines
    whose times were left out."""
    if engine is None:
        return list(measurements), False, ()
    others = tuple(sorted({m.engine for m in measurements if m.engine and m.engine != engine}))
    same = [m for m in measurements if m.engine == engine]
    if same:
        return same, False, others
    return [m for m in measurements if m.engine is None], True, others


def fit_cost(
    model: str,
    measurements: Sequence[Measurement],
    overhead_hint: float | None = None,
    *,
    engine: str | None = None,
) -> ModelCost:
    """The cost model of ``model`` from its measurements (newest first) for a run on
    ``engine`` (an engine type; None: any engine's times count).

    Only ``engine``'s measurements give times (those without a recorded engine when it has
    none; other engines' never). Runs of backfills win over sample runs, and measurements with
    the current SQL over stale ones. With tasks of clearly different sizes (the largest at least
    1.5 times the smallest), a weighted least-squares line through the median seconds per size
    separates the fixed cost per task from the cost per partition; with one size only,
    ``overhead_hint`` (a fixed cost per task learnt from other models of the same project) is
    taken as the fixed part, else the cost is taken to grow with the partitions alone.

    Where the tasks recorded their rows, the growing part is per row: a least-squares line of
    seconds over rows when the tasks' rows differ clearly (the largest at least 1.5 times the
    smallest), else the line above spread over the rows its tasks wrote. The typical partition
    is the median of the partitions' recorded rows (:func:`expected_rows`), else the measured
    tasks' mean. O(n log n) for n measurements."""
    if not measurements:
        return ModelCost(model, "none")
    timed, unrecorded, others = _timed_on(measurements, engine)
    if not timed:
        return ModelCost(model, "none", engine=engine, other_engines=others)
    fresh = [m for m in timed if not m.stale]
    use = fresh or timed
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
    total_rows, total_k = sum(r for r, _ in rows), sum(k for _, k in rows)
    rpp = total_rows / total_k if rows else None
    by_label = expected_rows(measurements)
    typical = statistics.median(by_label.values()) if by_label else rpp
    per_row = None
    # Per row only where partitions' rows are known: then tasks can be weighed by them; the
    # measurements of older ledgers (no rows) keep the partition line.
    if by_label and total_rows > 0 and typical and len(rows) == len(points):
        line = _fit_rows([(float(m.rows or 0), max(0.0, m.seconds)) for m in points])
        if line is not None:
            per_task, per_row = line
        else:  # the tasks wrote alike: the partition line, per row of what they wrote
            per_row = per_partition * total_k / total_rows
        per_partition = per_row * typical
        rpp = typical
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
        engine=engine,
        engine_unrecorded=unrecorded,
        other_engines=others,
        per_row=per_row,
        rows_by_label=MappingProxyType(by_label if per_row is not None else {}),
    )


def _fit_rows(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """``(fixed, per_row)`` of a least-squares line of seconds over rows, or None when the rows
    do not differ enough to separate them (or bigger tasks were not slower)."""
    rs = [r for r, _ in points]
    if len(points) < 2 or not max(rs) >= 1.5 * min(rs) or max(rs) == min(rs):
        return None
    n = len(points)
    rbar = sum(rs) / n
    tbar = sum(t for _, t in points) / n
    var = sum((r - rbar) ** 2 for r in rs)
    slope = sum((r - rbar) * (t - tbar) for r, t in points) / var
    if slope <= 0:
        return None
    if tbar - slope * rbar < 0:  # a negative intercept: no fixed part to speak of
        return 0.0, tbar / rbar
    return tbar - slope * rbar, slope


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
    shared_cores: bool = False,
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
    * ``shared_cores=True`` (an engine whose one task already uses every core; with cost data):
      no task per slot; the fewest tasks of at most :data:`MAX_SHARED_TASK_SECONDS` of work
      each, evenly sized, and never fewer partitions than the first rule asks.
    * ``batchable=False`` (an engine that cannot write several partitions in one transaction):
      always 1. Tasks never span a gap between runs of partitions (the planner's rule).

    >>> spark = ModelCost("fct", "measured", per_partition=0.1, per_task=0.3)
    >>> auto_partitions_per_run(90, spark, concurrency=2, min_task_seconds=2.0)  # pays 0.3 s
    27
    >>> auto_partitions_per_run(90, spark, concurrency=2, min_task_seconds=2.0, shared_cores=True)
    90
    >>> auto_partitions_per_run(9000, spark, concurrency=2, min_task_seconds=2.0, shared_cores=True)
    2250
    """
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
    if shared_cores:
        return max(by_work, _fewest_tasks(partitions, cost))
    return max(1, min(by_work, per_slot))


def _fewest_tasks(partitions: int, cost: ModelCost) -> int:
    """Partitions per task when ``partitions`` go to the fewest tasks of at most
    MAX_SHARED_TASK_SECONDS of ``cost`` each, evenly sized (at least 1 a task)."""
    if cost.per_partition <= 0:
        return partitions
    # Compared before rounding: a subnormal cost per partition makes the quotient infinite.
    # (1e-9: 300 / 0.1 is 2999.9999999999995 in floats, and 3000 partitions fit.)
    fits = (MAX_SHARED_TASK_SECONDS - cost.per_task) / cost.per_partition
    if fits >= partitions:
        most = partitions
    else:  # (a fixed cost above the bound: -inf with a subnormal cost per partition)
        most = max(1, math.floor(fits + 1e-9)) if fits >= 1 else 1
    tasks = math.ceil(partitions / most)
    return max(1, math.ceil(partitions / tasks))


def cost_summary(
    batching: str | int,
    min_task_seconds: float | None,
    models: Sequence[Any],
    costs: Mapping[str, ModelCost],
    *,
    shared_cores: bool = False,
) -> list[str]:
    """The lines of ``Plan.describe`` saying how tasks were batched and where each planned
    model's cost came from."""
    if batching == "auto":
        floor = "" if min_task_seconds is None else f"at least {format_duration(min_task_seconds)}"
        split = (
            "otherwise the fewest tasks of at most "
            f"{format_duration(MAX_SHARED_TASK_SECONDS)} each (a task uses every core)"
            if shared_cores
            else "never fewer tasks than the concurrency otherwise"
        )
        lines = [
            f"batching: auto (tasks of {floor or 'enough'} measured work, or one task for "
            f"a model with less in all; {split}; "
            f"without cost data one task per concurrent slot, at most "
            f"{UNCOSTED_MAX_PARTITIONS} partitions)"
        ]
    else:
        lines = [f"batching: {batching} partition{'' if batching == 1 else 's'} per task"]
    width = max([0, *(len(m.model) for m in models)])
    lines.extend(f"cost of {m.model:<{width}}  {costs[m.model]}" for m in models)
    return lines
