"""``Plan``: the tasks of a backfill with their dependencies, schedule, cost and findings.

>>> plan = project.plan("fct_daily_sales+", "2026-08-01", "2026-10-29")   # doctest: +SKIP
>>> print(plan)                                # 3 models, 187 tasks; est. ...; 1 warning
>>> plan.tasks.to_pandas()                     # one row per task, built in C++
>>> plan.estimate(costs={"fct_daily_sales": 240}).makespan
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import _core
from .._arrow import ArrowTable
from ..errors import InvalidInputError, NotFoundError
from .costs import ModelCost, cost_summary, format_duration, format_seconds
from .timeline import timeline_svg

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from .retention import RetentionCheck

log = logging.getLogger(__name__)

__all__ = [
    "Estimate",
    "ModelSummary",
    "Plan",
    "PlanContext",
    "PlanFinding",
    "format_seconds",
    "model_summaries",
]

# Displays stay small: per-task detail only for small plans, HTML only for few models.
_MERMAID_TASKS_MAX = 40
_HTML_MODELS_MAX = 200
_JSON_TASKS_MAX = 10_000


class PlanFinding(NamedTuple):
    """Something that would go wrong or deserves attention; ``severity`` is info/warning/error."""

    code: str
    severity: str
    model: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity.upper()} {self.code} [{self.model}]: {self.message}"


@dataclass(frozen=True)
class ModelSummary:
    """One planned model: what it rebuilds and what that costs."""

    model: str
    grain: str | None
    strategy: str
    partitions: int
    tasks: int
    first_task: int
    first: str | None  # label of the first partition ("2026-08-01"); "full" if unpartitioned
    last: str | None
    periods: list[tuple[dt.datetime, dt.datetime]]
    cost_per_partition: float
    cost_assumed: bool
    work: float  # seconds
    sched_start: float
    sched_end: float
    task_overhead: float = 0.0  # seconds per task beyond its partitions
    partitions_per_run: int = 1  # the most partitions one of its tasks rebuilds

    @property
    def period(self) -> str:
        if self.tasks == 0:
            return "nothing to do"
        if self.first == self.last or self.grain is None:
            return str(self.first)
        return f"{self.first}..{self.last}"


def model_summaries(core: _core.Plan) -> list[ModelSummary]:
    """The planned models of a core plan, in topological order."""
    return [ModelSummary(**d) for d in core.models()]


@dataclass(frozen=True)
class PlanContext:
    """What whoever planned knew besides the core plan, handed to :class:`Plan` when it is made
    (a plan is complete when built and never changes): how the tasks were batched (``"auto"``
    or the partitions per task asked for) and the smallest task that batching aimed at, where
    each model's cost came from, and the retention checks of the sources the plan replays
    (their findings join the plan's)."""

    batching: str | int
    min_task_seconds: float | None = None
    costs: Mapping[str, ModelCost] = field(default_factory=dict)
    replay: Sequence[RetentionCheck] = ()
    #: by task id, how many typical partitions of its model the task's work is (the rows of
    #: its periods: ``ModelCost.size_of``; -1: its partition count); empty: none weighed
    task_sizes: Sequence[float] = ()
    #: the tasks run on an embedded engine, in one process on this machine's cores: tasks side
    #: by side share them (see :attr:`Estimate.shared_machine`)
    shared_machine: bool = False
    #: a task's statement uses every core of the warehouse (Capabilities.shared_cores): auto
    #: batching gave each model the fewest tasks of bounded work, not a task per slot
    shared_cores: bool = False

    def __post_init__(self) -> None:
        # Copies that cannot change: a caller's dict or list is not shared with the plan.
        object.__setattr__(self, "costs", MappingProxyType(dict(self.costs)))
        object.__setattr__(self, "replay", tuple(self.replay))
        object.__setattr__(self, "task_sizes", tuple(self.task_sizes))

    @property
    def replay_findings(self) -> list[PlanFinding]:
        """The findings of the replay checks, in their order."""
        return [f for check in self.replay for f in check.findings]


@dataclass(frozen=True)
class Estimate:
    """The list schedule of a plan at a concurrency: total work, makespan, critical path.

    ``shared_machine``: the tasks run on an embedded engine, which gives each query all of
    this machine's cores, so tasks side by side share them instead of adding to them. Their
    costs are then machine time (:mod:`backfill.run.machine_time`), and the makespan is the
    total work at any concurrency: the machine is busy from the first task to the last, and
    more tasks at once only divide it further. The list schedule still orders the tasks."""

    concurrency: int
    total_work: float  # seconds of work, summed over tasks
    makespan: float  # seconds from the backfill's start to its last task's end
    critical_path: list[tuple[str, str]]  # (model, first partition label) per task
    per_model: dict[str, float]  # seconds of work by model
    assumed: list[str]  # models without cost data (no estimate is made for them)
    plan: Plan = field(repr=False, compare=False)
    shared_machine: bool = False

    def __str__(self) -> str:
        if self.assumed:  # a figure made of assumptions would read as a measurement
            return (
                f"no estimate: no cost data for {', '.join(self.assumed)} (run `backfill "
                "estimate`, or run a backfill: every run measures its tasks)"
            )
        if self.shared_machine:
            return (
                f"est. {format_seconds(self.makespan)} at {self.concurrency} concurrent "
                "(the tasks share this machine's cores)"
            )
        return (
            f"est. {format_seconds(self.makespan)} at {self.concurrency} concurrent "
            f"({format_seconds(self.total_work)} of work)"
        )


def _fine(seconds: float) -> str:
    """Short spans with their fractions (a 1.9 s backfill is not "2 s"), long ones coarse."""
    return format_duration(seconds) if seconds < 60 else format_seconds(seconds)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class Plan:
    """A planned backfill (immutable). Built by :meth:`backfill.Project.plan`.

    Complete when made: the core plan (tasks, schedule, findings, built in C++) and what the
    planner knew besides (``context``: costs, batching, replay checks; without one, the core
    plan's batching and no cost provenance). The caches below hold values derived from these,
    computed on first use."""

    def __init__(
        self,
        core: _core.Plan,
        project: Project,
        *,
        select: str,
        exclude: str | None,
        context: PlanContext | None = None,
    ) -> None:
        self._core = core
        self._project = project
        self._select = select
        self._exclude = exclude
        self._context = (
            PlanContext(batching=int(core.partitions_per_run)) if context is None else context
        )
        self._models: list[ModelSummary] | None = None
        self._tasks: ArrowTable | None = None
        self._findings: list[PlanFinding] | None = None

    @property
    def project(self) -> Project:
        return self._project

    @property
    def select(self) -> str:
        return self._select

    @property
    def exclude(self) -> str | None:
        return self._exclude

    @property
    def costs(self) -> dict[str, ModelCost]:
        """Per planned model: its cost and where it came from (measured, sample, given, none)."""
        return {
            m.model: self._context.costs.get(
                m.model,
                ModelCost(
                    m.model,
                    "given" if not m.cost_assumed else "none",
                    per_partition=m.cost_per_partition,
                ),
            )
            for m in self.models
        }

    @property
    def batching(self) -> str | int:
        """``"auto"`` or the partitions per task asked for."""
        return self._context.batching

    @property
    def replay(self) -> list[RetentionCheck]:
        """Per replayed Kafka source: the retention check (offsets per partition)."""
        return list(self._context.replay)

    # -- contents ------------------------------------------------------------------------------
    @property
    def tasks(self) -> ArrowTable:
        """One row per task (built in C++): task_id, model, start, end (UTC), label, partitions,
        wave, sched_start, sched_end (seconds from the backfill's start), depends_on."""
        if self._tasks is None:
            self._tasks = ArrowTable(self._core.tasks_table())
        return self._tasks

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.tasks.__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        """The task table as a pandas DataFrame (needs pyarrow)."""
        return self.tasks.to_pandas()

    def task(self, task_id: int) -> dict[str, Any]:
        """One task as a dict (for inspection; use :attr:`tasks` for many)."""
        return dict(self._core.task(task_id))

    def __len__(self) -> int:
        return int(self._core.task_count)

    @property
    def task_count(self) -> int:
        return int(self._core.task_count)

    @property
    def dependency_count(self) -> int:
        return int(self._core.dependency_count)

    @property
    def wave_count(self) -> int:
        return int(self._core.wave_count)

    @property
    def models(self) -> list[ModelSummary]:
        """Per planned model, in topological order."""
        if self._models is None:
            self._models = model_summaries(self._core)
        return self._models

    def model(self, name: str) -> ModelSummary:
        for m in self.models:
            if m.model == name:
                return m
        raise NotFoundError(
            f"model {name!r} is not in this plan; planned: "
            f"{', '.join(m.model for m in self.models)}"
        )

    @property
    def findings(self) -> list[PlanFinding]:
        """The planner's findings, then each planned model's static checks
        (:meth:`backfill.Project.check`: lint of its SQL) as findings of that model."""
        if self._findings is None:
            self._findings = (
                [PlanFinding(*f) for f in self._core.findings()]
                + self._context.replay_findings
                + self._model_checks()
            )
        return self._findings

    def _model_checks(self) -> list[PlanFinding]:
        out: list[PlanFinding] = []
        for m in self.models:
            model = self.project.models.get(m.model)
            if not m.tasks or model is None or not model.sql:
                continue
            for f in self.project.check(m.model):
                if f.code == "APPEND_STRATEGY":  # the planner reports it (and allow_append)
                    continue
                out.append(
                    PlanFinding(
                        f.code,
                        f.severity,
                        m.model,
                        f"line {f.line}, column {f.column}: {f.message}",
                    )
                )
        return out

    def errors(self, *, include_checks: bool = True) -> list[PlanFinding]:
        """Findings of severity error; ``include_checks=False`` leaves out the models' static
        checks (lint), for a caller that chose to run despite them."""
        found = (
            self.findings
            if include_checks
            else [PlanFinding(*f) for f in self._core.findings()] + self._context.replay_findings
        )
        return [f for f in found if f.severity == "error"]

    @property
    def stale(self) -> list[PlanFinding]:
        """The ``STALE_DOWNSTREAM`` findings: published partitions the backfill leaves with the
        old numbers (downstream models not selected, partitions still in progress at as_of)."""
        return [f for f in self.findings if f.code == "STALE_DOWNSTREAM"]

    @property
    def ok(self) -> bool:
        """False when any finding has severity error, or when the plan leaves published
        partitions stale (:attr:`stale`; runnable all the same: :meth:`errors` gates a run)."""
        return not self.errors() and not self.stale

    @property
    def start(self) -> dt.datetime:
        return self._core.start

    @property
    def end(self) -> dt.datetime:
        return self._core.end

    @property
    def as_of(self) -> dt.datetime:
        return self._core.as_of

    @property
    def include_in_progress(self) -> bool:
        """Whether the partitions in progress at as_of are planned."""
        return bool(self._core.include_in_progress)

    @property
    def propagate(self) -> str:
        return str(self._core.propagate)

    # -- estimates -----------------------------------------------------------------------------
    @property
    def schedule(self) -> Estimate:
        """The schedule computed with the plan's own costs and concurrency."""
        core = self._core
        ms = self.models
        path = [(str(t["model"]), str(t["label"])) for t in map(core.task, core.critical_path)]
        shared = self._context.shared_machine
        return Estimate(
            concurrency=int(core.concurrency),
            total_work=float(core.total_work),
            makespan=float(core.total_work if shared else core.makespan),
            critical_path=path,
            per_model={m.model: m.work for m in ms},
            assumed=[m.model for m in ms if m.cost_assumed and m.tasks],
            plan=self,
            shared_machine=shared,
        )

    def estimate(
        self,
        costs: Mapping[str, float] | None = None,
        *,
        concurrency: int | None = None,
        default_cost: float = 1.0,
    ) -> Estimate:
        """Schedules the same tasks with ``costs`` (seconds per typical partition by model, e.g.
        from a one-day sample run; other models keep the plan's own costs) at ``concurrency``
        (default: the plan's); tasks keep their sizes (a partition with 20x a typical one's
        recorded rows costs 20 partitions); ``.plan`` of the result carries the new
        sched_start/sched_end."""
        conc = int(self._core.concurrency) if concurrency is None else concurrency
        if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1:
            raise InvalidInputError(f"concurrency {concurrency!r} is not a positive integer")
        known = {m: c for m, c in self._context.costs.items() if c.known and m not in (costs or {})}
        core = self._core.rescheduled(
            {**{m: c.per_partition for m, c in known.items()}, **dict(costs or {})},
            float(default_cost),
            conc,
            {m: c.per_task for m, c in known.items()},
            list(self._context.task_sizes),
        )
        plan = Plan(
            core, self.project, select=self.select, exclude=self.exclude, context=self._context
        )
        return plan.schedule

    # -- displays ------------------------------------------------------------------------------
    def _counts(self) -> dict[str, int]:
        counts = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            counts[f.severity] += 1
        return counts

    def __str__(self) -> str:
        ms = self.models
        sched = self.schedule
        counts = self._counts()
        issues = [_plural(counts[s], s) for s in ("error", "warning") if counts[s]]
        text = f"{_plural(len(ms), 'model')}, {_plural(self.task_count, 'task')}; "
        if sched.assumed:
            text += f"no cost data for {_plural(len(sched.assumed), 'model')}: no estimate"
        else:
            text += f"est. {_fine(sched.makespan)} at {sched.concurrency} concurrent"
            stale_history = [m for m, c in self._context.costs.items() if c.stale]
            if stale_history:
                text += f" (stale history: {', '.join(stale_history)})"
        stale = len(self.stale)
        if stale:
            issues.append(f"{_plural(stale, 'model')} left stale")
        return text + ("; " + ", ".join(issues) if issues else "; no issues")

    def __repr__(self) -> str:
        return f"<Plan {self.select!r} {self.start:%Y-%m-%d}..{self.end:%Y-%m-%d}: {self}>"

    def describe(self) -> str:
        """A multi-line text report: summary, per-model table, findings."""
        lines = [str(self), ""]
        ms = self.models
        width = max([len("model"), *(len(m.model) for m in ms)])
        costs = self.costs
        lines.append(
            f"{'model':<{width}}  {'grain':<7}  {'partitions':>10}  {'tasks':>7}  "
            f"{'batch':>5}  {'work':>9}  period"
        )
        for m in ms:
            work = _fine(m.work) if costs[m.model].known else "?"
            lines.append(
                f"{m.model:<{width}}  {m.grain or '-':<7}  {m.partitions:>10}  {m.tasks:>7}  "
                f"{m.partitions_per_run:>5}  {work:>9}  {m.period}"
            )
        ctx = self._context
        lines.extend(
            [
                "",
                *cost_summary(
                    ctx.batching, ctx.min_task_seconds, ms, costs, shared_cores=ctx.shared_cores
                ),
            ]
        )
        for check in ctx.replay:
            lines.extend(["", str(check)])
        if self.findings:
            lines.append("")
            lines.extend(str(f) for f in self.findings)
        return "\n".join(lines)

    def to_dict(self, *, tasks: bool | None = None) -> dict[str, Any]:
        """JSON-ready contents; tasks are included when asked or when there are few."""
        sched = self.schedule
        out: dict[str, Any] = {
            "select": self.select,
            "exclude": self.exclude,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "as_of": self.as_of.isoformat(),
            "propagate": self.propagate,
            "include_in_progress": self.include_in_progress,
            "ok": self.ok,
            "summary": str(self),
            "task_count": self.task_count,
            "dependency_count": self.dependency_count,
            "wave_count": self.wave_count,
            "batching": self._context.batching,
            "min_task_seconds": self._context.min_task_seconds,
            "estimate": {
                "concurrency": sched.concurrency,
                # no figure when a model has no cost data (it would be made up)
                "total_work_seconds": None if sched.assumed else sched.total_work,
                "makespan_seconds": None if sched.assumed else sched.makespan,
                "shared_machine": sched.shared_machine,
                "critical_path": [{"model": m, "label": lab} for m, lab in sched.critical_path],
                "assumed_cost": sched.assumed,
            },
            "models": [
                {
                    "model": m.model,
                    "grain": m.grain,
                    "strategy": m.strategy,
                    "partitions": m.partitions,
                    "tasks": m.tasks,
                    "first": m.first,
                    "last": m.last,
                    "periods": [[a.isoformat(), b.isoformat()] for a, b in m.periods],
                    "partitions_per_run": m.partitions_per_run,
                    "cost_per_partition": m.cost_per_partition,
                    "cost_per_task": m.task_overhead,
                    "cost": self.costs[m.model].to_dict(),
                    "work_seconds": m.work if self.costs[m.model].known else None,
                }
                for m in self.models
            ],
            "findings": [f._asdict() for f in self.findings],
            "replay": [c.to_dict() for c in self._context.replay],
        }
        if tasks or (tasks is None and self.task_count <= _JSON_TASKS_MAX):
            rows = []
            for i in range(self.task_count):
                t = self._core.task(i)
                t["start"] = t["start"].isoformat() if t["start"] else None
                t["end"] = t["end"].isoformat() if t["end"] else None
                rows.append(t)
            out["tasks"] = rows
        return out

    def to_json(self, *, tasks: bool | None = None, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(tasks=tasks), indent=indent)

    def to_mermaid(self, *, per_task: bool | None = None) -> str:
        """A mermaid flowchart: one node per planned model with its period and counts (and
        stale downstream models dashed); one node per task for small plans or when asked."""
        ms = self.models
        ids = {m.model: f"m{i}" for i, m in enumerate(ms)}
        lines = ["flowchart LR"]
        if per_task or (per_task is None and self.task_count <= _MERMAID_TASKS_MAX):
            for i in range(self.task_count):
                t = self._core.task(i)
                batch = f", {t['partitions']} partitions" if t["partitions"] > 1 else ""
                lines.append(f'  t{i}["{_mm(t["model"])}<br/>{_mm(t["label"])}{batch}"]')
            for i in range(self.task_count):
                for d in self._core.depends_on(i):
                    lines.append(f"  t{d} --> t{i}")
            return "\n".join(lines) + "\n"
        for m in ms:
            counts = f"{_plural(m.partitions, 'partition')}, {_plural(m.tasks, 'task')}"
            lines.append(f'  {ids[m.model]}["{_mm(m.model)}<br/>{_mm(m.period)}<br/>{counts}"]')
        stale = [f.model for f in self.findings if f.code == "STALE_DOWNSTREAM"]
        for i, name in enumerate(stale):
            ids[name] = f"s{i}"
            lines.append(f'  s{i}["{_mm(name)}<br/>not selected: stale"]')
        for name in [*(m.model for m in ms), *stale]:
            for parent, mapping in self.project.parents(name):
                if parent in ids:
                    arrow = "-->" if mapping == "overlap" else f"-->|{_mm(mapping)}|"
                    lines.append(f"  {ids[parent]} {arrow} {ids[name]}")
        if stale:
            lines.append("  classDef stale stroke-dasharray: 5 5")
            lines.append(f"  class {','.join(ids[s] for s in stale)} stale")
        return "\n".join(lines) + "\n"

    def _repr_html_(self) -> str | None:
        ms = self.models
        if len(ms) > _HTML_MODELS_MAX:
            return None
        e = html.escape
        costs = self.costs
        rows = "".join(
            f"<tr><td>{e(m.model)}</td><td>{e(m.grain or '-')}</td><td>{e(m.strategy)}</td>"
            f"<td style='text-align:right'>{m.partitions}</td>"
            f"<td style='text-align:right'>{m.tasks}</td>"
            f"<td style='text-align:right'>{m.partitions_per_run}</td><td>{e(m.period)}</td>"
            f"<td style='text-align:right'>{e(format_seconds(m.work))}</td>"
            f"<td>{e(str(costs[m.model]))}</td></tr>"
            for m in ms
        )
        colors = {"error": "#c62828", "warning": "#ef6c00", "info": "#546e7a"}
        findings = "".join(
            f"<li><b style='color:{colors[f.severity]}'>{e(f.code)}</b> "
            f"<code>{e(f.model)}</code>: {e(f.message)}</li>"
            for f in self.findings
        )
        return (
            "<div class='backfill-plan'>"
            f"<p><b>Backfill plan</b> <code>{e(self.select)}</code> "
            f"{self.start:%Y-%m-%d}..{self.end:%Y-%m-%d} (end exclusive): {e(str(self))}</p>"
            "<table><thead><tr><th>model</th><th>grain</th><th>strategy</th><th>partitions</th>"
            "<th>tasks</th><th>batch</th><th>period</th><th>work</th><th>cost from</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>"
            + (f"<ul>{findings}</ul>" if findings else "")
            + self._timeline_svg()
            + "</div>"
        )

    def _timeline_svg(self) -> str:
        return timeline_svg([m for m in self.models if m.tasks])


def _mm(text: object) -> str:
    """Escapes text for a quoted mermaid label."""
    return str(text).replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
