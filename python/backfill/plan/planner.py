"""Planning: the tasks that rebuild the selected models of a project over a period.

>>> plan = plan_project(project, "clean_orders+", "2026-08-01", "2026-10-29")  # doctest: +SKIP
>>> plan = plan_project(project, "fct_*", "2026-08-01", "2026-10-29",
...                     PlanOptions(concurrency=8, propagate="clip"))          # doctest: +SKIP

The planner itself runs in the C++ core (``_core.plan``); this module checks the options, reads
the one clock of planning (``as_of``), decides each model's batch under
``partitions_per_run="auto"`` from its cost, runs the retention check of the landing sources the
plan replays (:mod:`.retention`), and only then makes the :class:`~.plan.Plan`, complete and
unchanging. :meth:`backfill.Project.plan` is the user-facing entry: it adds the costs measured by
past backfills, which live in a higher stage.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .. import _core
from ..calendar import partitions as calendar_partitions
from ..errors import InvalidInputError
from .costs import DEFAULT_MIN_TASK_SECONDS, ModelCost, auto_partitions_per_run
from .plan import Plan, PlanContext, model_summaries
from .retention import check_retention

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["PlanOptions", "model_costs_given", "plan_project"]

#: A period bound as the user gives it: a tz-aware datetime, a date, or an ISO string.
When = dt.datetime | dt.date | str


@dataclass(frozen=True)
class PlanOptions:
    """How to plan (the keywords of :meth:`backfill.Project.plan`, documented there).

    ``as_of`` defaults to now (read once, by the planner); ``min_task_seconds`` to backfill.yml
    ``batching: {min_task: ...}``, else 2 s; ``include_in_progress`` to the project's
    ``runs_in_progress``."""

    exclude: str | None = None
    as_of: When | None = None
    tz: str | None = None
    propagate: Literal["impact", "clip"] = "impact"
    partitions_per_run: int | Literal["auto"] = "auto"
    concurrency: int = 4
    allow_append: bool = False
    costs: Mapping[str, float | ModelCost] | None = None
    default_cost: float = 1.0
    min_task_seconds: float | None = None
    unbatched: Collection[str] = ()
    include_in_progress: bool | None = None
    #: the engine is embedded: tasks side by side share this machine's cores (PlanContext)
    shared_machine: bool = False
    #: a task's statement uses every core of the warehouse (Capabilities.shared_cores): automatic
    #: batching does not split a model's period to fill concurrent slots
    shared_cores: bool = False

    @property
    def auto(self) -> bool:
        """Whether each model's batch is decided from its cost."""
        return self.partitions_per_run == "auto"

    def __post_init__(self) -> None:
        # Options no plan can be made with are refused when made, naming the value.
        for name, value in (
            ("partitions_per_run", 1 if self.auto else self.partitions_per_run),
            ("concurrency", self.concurrency),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(
                    f"{name} {value!r} is not a positive integer"
                    + ("" if name == "concurrency" else " or 'auto'")
                )
        if self.propagate not in ("impact", "clip"):
            raise InvalidInputError(f"propagate {self.propagate!r}: expected 'impact' or 'clip'")


def plan_project(
    project: Project,
    select: str,
    start: When,
    end: When,
    options: PlanOptions | None = None,
) -> Plan:
    """Plans rebuilding the models ``select`` picks in ``project`` for [start, end) (end
    exclusive); see :meth:`backfill.Project.plan` for what the options mean."""
    return _Planner(project, options or PlanOptions()).plan(select, start, end)


def model_costs_given(costs: Mapping[str, float | ModelCost] | None) -> dict[str, ModelCost]:
    """Given costs as :class:`ModelCost` (a bare number: seconds per partition, "given")."""
    out: dict[str, ModelCost] = {}
    for name, value in (costs or {}).items():
        if isinstance(value, ModelCost):
            out[name] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInputError(
                f"cost of {name!r} is {value!r}; expected seconds per partition >= 0"
            )
        out[name] = ModelCost(name, "given", per_partition=float(value))
    return out


class _Planner:
    """One planning of one project: options resolved against the project, then the core plan,
    then (under ``"auto"``) a second core plan with each model's batch."""

    def __init__(self, project: Project, options: PlanOptions) -> None:
        self.project = project
        self.options = options
        self.cost_of = model_costs_given(options.costs)
        self.min_task_seconds = self._min_task_seconds()
        self.include_in_progress = self._include_in_progress()

    def _min_task_seconds(self) -> float:
        value = self.options.min_task_seconds
        if value is None:
            settings = self.project.settings
            value = (
                settings.min_task_seconds
                if settings is not None and settings.min_task_seconds is not None
                else DEFAULT_MIN_TASK_SECONDS
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise InvalidInputError(f"min_task_seconds {value!r}: expected seconds >= 0")
        return float(value)

    def _include_in_progress(self) -> bool:
        value = self.options.include_in_progress
        if value is None:
            value = self.project.runs_in_progress
        if not isinstance(value, bool):
            raise InvalidInputError(f"include_in_progress {value!r}: expected True or False")
        return value

    def plan(self, select: str, start: When, end: When) -> Plan:
        opts = self.options
        as_of = opts.as_of
        if as_of is None:  # the one clock read of planning: the plan records it (plan.as_of)
            as_of = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        selected = self.project.select(select, opts.exclude)
        core = self._core_plan(selected, start, end, as_of, {})
        if opts.auto:  # the partition counts of the first plan decide each model's batch
            runs = self._batches(core)
            if runs:
                core = self._core_plan(selected, start, end, as_of, runs)
        sizes = self._task_sizes(core)
        if sizes:  # tasks weighed by the rows of their periods, where those are known
            costs, overheads = self._known()
            core = core.rescheduled(
                costs, float(opts.default_cost), opts.concurrency, overheads, sizes
            )
        plan = Plan(
            core,
            self.project,
            select=select,
            exclude=opts.exclude,
            context=self._context(core, sizes),
        )
        log.info("planned %s", plan)
        return plan

    def _context(self, core: _core.Plan, sizes: list[float]) -> PlanContext:
        """What the plan keeps besides the core plan: each planned model's cost and where it
        came from, the batching, the tasks' sizes, and the retention checks of the sources it
        replays."""
        opts = self.options
        models = model_summaries(core)
        return PlanContext(
            batching="auto" if opts.auto else int(opts.partitions_per_run),
            min_task_seconds=self.min_task_seconds,
            costs={m.model: self.cost_of.get(m.model, ModelCost(m.model, "none")) for m in models},
            replay=check_retention(self.project, models, as_of=core.as_of),
            task_sizes=sizes,
            shared_machine=opts.shared_machine,
            shared_cores=opts.shared_cores,
        )

    def _known(self) -> tuple[dict[str, float], dict[str, float]]:
        """Seconds per partition and per task of the models with cost data."""
        known = {m: c for m, c in self.cost_of.items() if c.known}
        return (
            {m: c.per_partition for m, c in known.items()},
            {m: c.per_task for m, c in known.items()},
        )

    def _task_sizes(self, core: _core.Plan) -> list[float]:
        """Per task, how many typical partitions of its model its work is (the rows earlier runs
        recorded for its partitions over a typical partition's: ``ModelCost.size_of``); -1 (its
        partition count) for models whose costs are not per row; empty when no model's is.
        O(P) for the P partitions of those models' tasks."""
        weighed = {
            n: c
            for n, c in self.cost_of.items()
            if c.known and c.per_row is not None and c.rows_by_label
        }
        models = [m for m in core.models() if m["model"] in weighed and m["tasks"]]
        if not models:
            return []
        sizes = [-1.0] * int(core.task_count)
        for m in models:
            cost, model = weighed[str(m["model"])], self.project.models[str(m["model"])]
            first = int(m["first_task"])
            for i in range(first, first + int(m["tasks"])):
                t = core.task(i)
                if int(t["partitions"]) == 1 or not model.grain:
                    labels = [str(t["label"])]
                else:
                    parts = calendar_partitions(model.grain, t["start"], t["end"], tz=model.tz)
                    labels = [p.label for p in parts]
                sizes[i] = cost.size_of(labels)
        return sizes

    def _core_plan(
        self, selected: list[str], start: When, end: When, as_of: When, runs: dict[str, int]
    ) -> _core.Plan:
        opts = self.options
        costs, overheads = self._known()
        return _core.plan(
            self.project.graph,
            selected,
            start,
            end,
            as_of,
            tz=opts.tz,
            propagate=opts.propagate,
            partitions_per_run=1 if opts.auto else int(opts.partitions_per_run),
            concurrency=opts.concurrency,
            allow_append=opts.allow_append,
            costs=costs,
            default_cost=float(opts.default_cost),
            runs=runs,
            overheads=overheads,
            include_in_progress=self.include_in_progress,
        )

    def _batches(self, core: _core.Plan) -> dict[str, int]:
        """Partitions per task by model, where more than one (models in ``unbatched``, and
        landing models, whose tasks record the log positions each read, keep one)."""
        runs: dict[str, int] = {}
        for m in core.models():
            name = str(m["model"])
            model = self.project.models.get(name)
            single = name in self.options.unbatched or (
                model is not None and "landing" in model.meta
            )
            k = auto_partitions_per_run(
                int(m["partitions"]),
                self.cost_of.get(name),
                concurrency=self.options.concurrency,
                min_task_seconds=self.min_task_seconds,
                batchable=not single,
                shared_cores=self.options.shared_cores,
            )
            if k > 1:
                runs[name] = k
        return runs
