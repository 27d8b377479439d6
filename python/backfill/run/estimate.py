"""Estimate a plan from one sample partition per model, run into a scratch area.

>>> est = estimate(project, plan, concurrency=10)          # doctest: +SKIP
>>> print(est)   # fct_daily_sales: one day (2026-08-01) took 0.04 s; 89 days ...

The scratch area (schema ``audit_scratch_...`` on DuckDB) is never seen by readers and is dropped
when the estimate ends, whatever happens. Inside it ``ref()`` to a sampled model reads its scratch
output for the sampled period and published data elsewhere, as a backfill's audit area does.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._arrow import html_table
from .._stamps import utcnow
from ..calendar import partitions as calendar_partitions
from ..engines import Engine, scratch_area
from ..engines.registry import engine_for
from ..errors import BackfillError, InvalidInputError
from ..plan import Estimate, format_seconds
from .backfill import sql_hash
from .ledger import ledger_for

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from ..plan import Plan

log = logging.getLogger(__name__)

__all__ = ["EstimateReport", "SampleRun", "estimate", "format_seconds_fine"]


@dataclass(frozen=True)
class SampleRun:
    model: str
    label: str
    grain: str | None
    seconds: float
    rows: int
    partitions: int  # how many partitions of this model the plan rebuilds


@dataclass(frozen=True)
class EstimateReport:
    """Sample runs (one partition per model) and the plan's schedule with their costs."""

    samples: list[SampleRun]
    estimate: Estimate
    concurrency: int

    @property
    def makespan(self) -> float:
        return self.estimate.makespan

    def __str__(self) -> str:
        lines = []
        for s in self.samples:
            unit = s.grain or "run"
            plural = f"{s.partitions} {unit}{'' if s.partitions == 1 else 's'}"
            lines.append(
                f"{s.model}: one {unit} ({s.label}) took {format_seconds_fine(s.seconds)}"
                f" ({s.rows:,} row{'' if s.rows == 1 else 's'}); {plural} to rebuild"
            )
        total = sum(s.partitions for s in self.samples)
        est = self.estimate
        lines.append(
            f"{total} partitions at {self.concurrency} concurrent ≈ "
            f"{format_seconds_fine(est.makespan)}"
            + (
                " (the embedded engine gives each task this machine's cores: tasks side by "
                "side share them)"
                if est.shared_machine
                else f" ({format_seconds_fine(est.total_work)} of work)"
            )
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "samples": [s.__dict__ for s in self.samples],
            "concurrency": self.concurrency,
            "makespan_seconds": self.estimate.makespan,
            "total_work_seconds": self.estimate.total_work,
            "per_model_seconds": self.estimate.per_model,
            "shared_machine": self.estimate.shared_machine,
        }

    def _repr_html_(self) -> str | None:
        rows = [
            [
                s.model,
                s.label,
                format_seconds_fine(s.seconds),
                f"{s.rows:,}",
                str(s.partitions),
                format_seconds_fine(self.estimate.per_model.get(s.model, 0)),
            ]
            for s in self.samples
        ]
        return (
            html_table(["model", "sample", "took", "rows", "partitions", "work"], rows)
            + f"<p>at {self.concurrency} concurrent &asymp; "
            f"{html.escape(format_seconds_fine(self.estimate.makespan))}</p>"
        )


def format_seconds_fine(seconds: float) -> str:
    """Like :func:`format_seconds`, with sub-second precision for short spans."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    return format_seconds(seconds)


def estimate(
    project: Project, plan: Plan, *, concurrency: int | None = None, engine: Engine | None = None
) -> EstimateReport:
    """Runs the first partition of each planned model into a scratch area, timing it, and
    schedules the plan with those costs (seconds per partition) at ``concurrency``."""
    eng = engine or engine_for(project)
    firsts: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for i in range(plan.task_count):
        t = plan.task(i)
        firsts.setdefault(str(t["model"]), t)
        counts[str(t["model"])] = counts.get(str(t["model"]), 0) + int(t["partitions"])
    if not firsts:
        raise InvalidInputError("the plan has no tasks to sample")
    order = [m for m in project.topological_order() if m in firsts]
    samples: dict[str, tuple[str, dt.datetime | None, dt.datetime | None]] = {}
    for name in order:
        m, t = project.models[name], firsts[name]
        start, end = t["start"], t["end"]
        if start is not None and end is not None and m.grain:
            p = calendar_partitions(m.grain, start, end, tz=m.tz)[0]
            samples[name] = (p.label, p.start, p.end)
        else:
            samples[name] = (str(t["label"]), start, end)
    periods = {n: [(s, e)] for n, (_, s, e) in samples.items() if s is not None and e is not None}
    runs: list[SampleRun] = []
    try:
        with scratch_area(eng, "estimate", periods) as area:
            for name in order:
                label, s, e = samples[name]
                result = eng.run_task(project, name, s, e, area)
                log.info("estimate: %s %s took %.3f s", name, label, result.seconds)
                runs.append(
                    SampleRun(
                        name,
                        label,
                        project.models[name].grain,
                        result.seconds,
                        result.rows_written,
                        counts[name],
                    )
                )
    finally:
        eng.close()
    _keep(project, runs, eng.name)
    conc = plan.schedule.concurrency if concurrency is None else concurrency
    costs = {r.model: r.seconds for r in runs}
    return EstimateReport(runs, plan.estimate(costs=costs, concurrency=conc), conc)


def _keep(project: Project, runs: list[SampleRun], engine_type: str) -> None:
    """Records the sample runs in the project's ledger, with the engine type that ran them, so
    that later plans on that engine estimate from them (until backfills measure the models
    themselves)."""
    if project.settings is None or not runs:
        return
    now = utcnow()
    try:
        ledger = ledger_for(project)
        ledger.record_cost_samples(
            project.name,
            [
                {
                    "model": r.model,
                    "sql_hash": sql_hash(project.models[r.model].sql),
                    "label": r.label,
                    "partitions": 1,
                    "seconds": r.seconds,
                    "rows": r.rows,
                    "created_at": now,
                    "engine_type": engine_type,
                }
                for r in runs
            ],
        )
        ledger.close()
    except BackfillError as exc:  # the estimate stands; only later plans miss it
        log.warning("estimate: the sample runs were not recorded in the ledger: %s", exc)
