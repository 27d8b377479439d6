"""Checks that need an engine: estimate a plan from one sample partition, and run-twice.

>>> est = estimate(project, plan, concurrency=10)          # doctest: +SKIP
>>> print(est)   # fct_daily_sales: one day (2026-08-01) took 0.04 s; 89 days ...
>>> print(check_run_twice(project, "fct_daily_sales", "2026-08-03"))   # doctest: +SKIP

Both write into scratch areas (schemas ``audit_scratch_...``) that readers never see and that
are dropped when the check ends, whatever happens. Inside a scratch area ``ref()`` to a model run
in the same check reads its scratch output for the sampled period and published data elsewhere,
exactly as a backfill's audit area does.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._arrow import html_table
from .audit import _cursor, choose_key
from .calendar import partition_of, partitions as calendar_partitions
from .checks import check_model
from .diffing import DiffResult, diff
from .engines import Area, Engine, open_engine
from .engines.duckdb import DuckDBEngine
from .errors import InvalidInputError, NotFoundError
from .fingerprinting import fingerprint
from .lint import LintResult
from .planning import Estimate, format_seconds

if TYPE_CHECKING:  # pragma: no cover
    from .planning import Plan
    from .project import Project

log = logging.getLogger(__name__)

__all__ = ["CheckReport", "EstimateReport", "SampleRun", "check_run_twice", "estimate"]

# The project's write strategies as check_model names them.
_STRATEGY = {"replace": "delete+insert", "merge": "merge", "full": "table"}


def _engine(project: Project, engine: Engine | None) -> Engine:
    if engine is not None:
        return engine
    if project.settings is None:
        raise InvalidInputError(f"{project!r} has no engine settings: load it from a project "
                                "directory (Project.load) or pass engine=")
    return open_engine(project.settings.engine)


def _scratch(kind: str) -> str:
    return f"scratch_{kind}_{uuid.uuid4().hex[:8]}"


# -- estimate ------------------------------------------------------------------------------------
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
    #: an embedded engine shares this machine's cores: the schedule at min(concurrency, cores)
    cores: int | None = None
    on_cores: Estimate | None = None

    @property
    def makespan(self) -> float:
        return self.estimate.makespan

    def __str__(self) -> str:
        lines = []
        for s in self.samples:
            unit = s.grain or "run"
            plural = f"{s.partitions} {unit}{'' if s.partitions == 1 else 's'}"
            lines.append(f"{s.model}: one {unit} ({s.label}) took {format_seconds_fine(s.seconds)}"
                         f" ({s.rows:,} row{'' if s.rows == 1 else 's'}); {plural} to rebuild")
        total = sum(s.partitions for s in self.samples)
        lines.append(f"{total} partitions at {self.concurrency} concurrent ≈ "
                     f"{format_seconds_fine(self.estimate.makespan)} "
                     f"({format_seconds_fine(self.estimate.total_work)} of work)")
        if self.on_cores is not None:
            lines.append(f"(the embedded engine shares this machine's {self.cores} cores: "
                         f"≈ {format_seconds_fine(self.on_cores.makespan)} at "
                         f"{self.on_cores.concurrency} concurrent)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"samples": [s.__dict__ for s in self.samples], "concurrency": self.concurrency,
                "makespan_seconds": self.estimate.makespan,
                "total_work_seconds": self.estimate.total_work,
                "per_model_seconds": self.estimate.per_model, "cores": self.cores,
                "makespan_on_cores_seconds": None if self.on_cores is None else
                self.on_cores.makespan}

    def _repr_html_(self) -> str | None:
        rows = [[s.model, s.label, format_seconds_fine(s.seconds), f"{s.rows:,}",
                 str(s.partitions), format_seconds_fine(self.estimate.per_model.get(s.model, 0))]
                for s in self.samples]
        return (html_table(["model", "sample", "took", "rows", "partitions", "work"], rows)
                + f"<p>at {self.concurrency} concurrent &asymp; "
                  f"{html.escape(format_seconds_fine(self.estimate.makespan))}</p>")


def format_seconds_fine(seconds: float) -> str:
    """Like :func:`format_seconds`, with sub-second precision for short spans."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    return format_seconds(seconds)


def estimate(project: Project, plan: Plan, *, concurrency: int | None = None,
             engine: Engine | None = None) -> EstimateReport:
    """Runs the first partition of each planned model into a scratch area, timing it, and
    schedules the plan with those costs (seconds per partition) at ``concurrency``."""
    eng = _engine(project, engine)
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
    area = Area(_scratch("estimate"), {n: [(s, e)] for n, (_, s, e) in samples.items()
                                       if s is not None and e is not None})
    runs: list[SampleRun] = []
    try:
        for name in order:
            label, s, e = samples[name]
            result = eng.run_task(project, name, s, e, area)
            log.info("estimate: %s %s took %.3f s", name, label, result.seconds)
            runs.append(SampleRun(name, label, project.models[name].grain, result.seconds,
                                  result.rows_written, counts[name]))
    finally:
        eng.drop_area(str(area.backfill_id))
        eng.close()
    conc = plan.schedule.concurrency if concurrency is None else concurrency
    costs = {r.model: r.seconds for r in runs}
    est = plan.estimate(costs=costs, concurrency=conc)
    cores = os.cpu_count() or 1
    if isinstance(eng, DuckDBEngine) and conc > cores:
        # In-process DuckDB tasks compete for this machine's cores; more threads than cores
        # do not shorten CPU-bound work.
        return EstimateReport(runs, est, conc, cores, plan.estimate(costs=costs,
                                                                    concurrency=cores))
    return EstimateReport(runs, est, conc)


# -- run twice -----------------------------------------------------------------------------------
@dataclass
class CheckReport:
    """Two runs of one partition of one model compared, plus the model's static findings."""

    model: str
    partition: str
    fingerprints: tuple[str, str]
    differing_columns: list[str]
    diff: DiffResult | None
    findings: LintResult
    key: list[str] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return self.fingerprints[0] == self.fingerprints[1]

    @property
    def ok(self) -> bool:
        return self.deterministic and not self.findings.errors

    def __str__(self) -> str:
        lines = []
        if self.deterministic:
            lines.append(f"check {self.model} {self.partition}: ran twice, identical "
                         f"(fingerprint {self.fingerprints[0]})")
        else:
            lines.append(f"check {self.model} {self.partition}: ran twice, the runs DIFFER "
                         f"({self.fingerprints[0]} vs {self.fingerprints[1]})")
            if self.differing_columns:
                counts = self.diff.changed_columns() if self.diff is not None else {}
                cols = ", ".join(f"{c} ({counts[c]:,} rows)" if c in counts else c
                                 for c in self.differing_columns)
                lines.append(f"  columns that differ between runs: {cols}")
            lines.append("  a backfill of this model is not reproducible: find what reads the "
                         "clock or randomness (lint below) and make it a function of the period")
        if self.findings.all:
            lines.append("  findings:")
            lines += [f"    {line}" for line in str(self.findings).splitlines()]
        else:
            lines.append("  lint and strategy: no findings")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "partition": self.partition,
                "deterministic": self.deterministic, "ok": self.ok,
                "fingerprints": list(self.fingerprints),
                "differing_columns": self.differing_columns, "key": self.key,
                "changed_columns": self.diff.changed_columns() if self.diff else {},
                "findings": self.findings.to_dicts()}

    def _repr_html_(self) -> str | None:
        return f"<pre>{html.escape(str(self))}</pre>"


def _partition(project: Project, model: str,
               partition: str | dt.date | dt.datetime) -> tuple[str, dt.datetime, dt.datetime]:
    m = project.models[model]
    if not m.grain or not m.event_time or m.strategy == "full":
        raise InvalidInputError(f"model {model!r} is not partitioned (strategy {m.strategy}, "
                                f"grain {m.grain}); nothing to check per partition")
    value: Any = partition
    if isinstance(partition, str):
        text = partition.strip()
        if len(text) == 7 and text[4] == "-":  # 2026-08: a month label
            text += "-01"
        value = text
    try:
        p = partition_of(value, m.grain, m.tz)
    except Exception as exc:
        raise InvalidInputError(f"partition {partition!r} of {model}: expected an ISO date or "
                                f"date-time inside a {m.grain} partition ({exc})") from None
    return p.label, p.start, p.end


def check_run_twice(project: Project, model: str, partition: str | dt.date | dt.datetime, *,
                    engine: Engine | None = None) -> CheckReport:
    """Runs ``model`` for ``partition`` twice into scratch areas and compares the results
    (fingerprints; on a difference the differing columns, by the diff engine), plus the lint
    and strategy findings of its SQL (:func:`backfill.check_model`)."""
    if model not in project.models:
        raise NotFoundError(f"no model {model!r} in project {project.name!r} (models: "
                            f"{', '.join(project.models)})")
    m = project.models[model]
    label, start, end = _partition(project, model, partition)
    eng = _engine(project, engine)
    areas = [Area(_scratch(f"check{i}"), {model: [(start, end)]}) for i in (1, 2)]
    differing: list[str] = []
    result: DiffResult | None = None
    key: list[str] = []
    try:
        fps = [eng.run_task(project, model, start, end, a).fingerprint for a in areas]
        if fps[0] != fps[1] and isinstance(eng, DuckDBEngine):
            rels = [eng.relation(model, a) for a in areas]
            with eng.connect() as cur, _cursor(cur) as c1, _cursor(cur) as c2:
                fp1 = fingerprint(c1.sql(f"SELECT * FROM {rels[0]}"))
                differing = fp1.differing_columns(fingerprint(c2.sql(f"SELECT * FROM {rels[1]}")))
                key, _ = choose_key(cur, m, rels)
                result = diff(c1.sql(f"SELECT * FROM {rels[0]}"),
                              c2.sql(f"SELECT * FROM {rels[1]}"), key=key,
                              on_duplicate="report")
    finally:
        for a in areas:
            eng.drop_area(str(a.backfill_id))
        eng.close()
    parents = [d.parent for d in m.depends_on if d.parent in project and
               getattr(project[d.parent], "grain", None)]
    # Sources are named "schema.table" in the project, as the lint wants for source() reads.
    findings = check_model(sql=m.sql or "", strategy=_STRATEGY.get(m.strategy),
                           partitioned_inputs=parents)
    return CheckReport(model, label, (fps[0], fps[1]), differing, result, findings, key)
