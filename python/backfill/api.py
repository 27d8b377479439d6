"""The user-facing classes, whose methods span the stages: ``Project`` (a model-stage project that
also records backfills and reads the changelog) and ``Backfill`` (a run-stage backfill that also
audits, publishes and discards). They sit above every stage, so no stage imports a higher one to
offer these conveniences.

>>> project = backfill.Project.load("/tmp/shop")                                # doctest: +SKIP
>>> bf = project.backfill(project.plan("fct_daily_sales+", "2026-08-01", "2026-10-29"),
...                       reason="discount bug fixed")                          # doctest: +SKIP
>>> bf.run(); bf.audit(); bf.publish(note="revenue was overstated by ~2%")      # doctest: +SKIP

Project formats besides ``backfill.yml`` are plugins: entry points of the group
``backfill.projects`` (dbt ships with the package), each a callable ``load(path, **options)``.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ._extras import extra_required
from .audit import AuditReport, audit_backfill
from .audit.against import audit_against
from .engines import Engine, engine_capabilities
from .errors import BackfillError, InvalidInputError
from .lint import LintResult
from .model import PROJECT_FILE, load_project
from .model import Project as _ModelProject
from .plan import Plan
from .plan.planner import PlanOptions, plan_project
from .publish import (
    Changelog,
    ForwardChange,
    GcReport,
    Publication,
    Rollback,
    changelog,
    collect_garbage,
    discard_backfill,
    forward_change,
    parse_from,
    publish_backfill,
    rollback_publication,
)
from .run import Backfill as _RunBackfill
from .run import LedgerBackend, model_costs
from .run.estimate import EstimateReport, estimate

__all__ = ["Backfill", "BackfillDraft", "Project", "plan_with_history", "project_format"]

PROJECTS_GROUP = "backfill.projects"


def project_format(name: str) -> Callable[..., Project]:
    """The loader of project format ``name`` (an entry point of ``backfill.projects``)."""
    found = {ep.name: ep for ep in entry_points(group=PROJECTS_GROUP)}
    if name not in found:
        raise InvalidInputError(
            f"project format {name!r} is not installed; installed: "
            f"{', '.join(sorted(found)) or 'none (reinstall backfill)'}"
        )
    with extra_required(f"project format {name!r}"):
        loader: Callable[..., Project] = found[name].load()
    return loader


def plan_with_history(
    project: _ModelProject, select: str, start: Any, end: Any, *, history: bool, **options: Any
) -> Plan:
    """:meth:`Project.plan` of any project: the plan stage's planner (which also checks the
    retention of the Kafka sources whose landing models it rebuilds), given the costs measured
    by past backfills (``history``) and the engine's batching capability."""
    caps = None if project.settings is None else engine_capabilities(project.settings.engine)
    options.setdefault("shared_machine", caps is not None and caps.embedded)
    options.setdefault("shared_cores", caps is not None and caps.shared_cores)
    if history and project.settings is not None:
        names = project.select(select, options.get("exclude"))
        options["costs"] = {**model_costs(project, names), **(options.get("costs") or {})}
        if caps is not None and not caps.multi_partition_tasks:
            options["unbatched"] = set(names) | set(options.get("unbatched") or ())
    return plan_project(project, select, start, end, PlanOptions(**options))


class Project(_ModelProject):
    """Sources and models of a pipeline; plans backfills over them, records and runs them."""

    @classmethod
    def load(cls, path: str | Path) -> Project:
        """Loads a project directory (``backfill.yml`` + ``models/*.sql``; see
        :mod:`backfill.model.files`), or a dbt project directory without a backfill.yml
        (:meth:`from_dbt`)."""
        root = Path(path)
        if (
            root.is_dir()
            and not (root / PROJECT_FILE).exists()
            and (root / "dbt_project.yml").exists()
        ):
            return cls.from_dbt(root)
        project = load_project(path, project_class=cls)
        assert isinstance(project, Project)
        return project

    @classmethod
    def from_dbt(
        cls, path: str | Path, *, profiles_dir: str | Path | None = None, target: str | None = None
    ) -> Project:
        """Imports a dbt project directory (``dbt parse`` first when ``target/manifest.json``
        is missing or older than a project file) or a ``manifest.json``; see
        :mod:`backfill.integrations.dbt`. A backfill of it runs through dbt, into an audit
        schema beside the published one."""
        with extra_required("a dbt project", "dbt"):
            return project_format("dbt")(path, profiles_dir=profiles_dir, target=target)

    def plan(
        self, select: str, start: Any, end: Any, *, history: bool = True, **options: Any
    ) -> Plan:
        """Plans rebuilding the selected models for [start, end) (end exclusive).

        Each model rebuilds the whole partitions of its grain overlapping the period, clipped
        to its ``begin`` and to partitions ended by ``as_of`` (default: now, read once here).
        ``propagate="impact"`` spreads the change to selected downstream models through their
        mappings; ``"clip"`` keeps only the period and reports what stays stale. Dates and naive
        values are read in ``tz`` (default UTC). ``exclude`` is a selector of models to leave
        out; ``concurrency`` (default 4): tasks at once, for the schedule and batching;
        ``allow_append`` makes an ``append`` model (whose re-runs double data) a warning, not an
        error.

        ``costs``: seconds per partition by model, or a :class:`~backfill.plan.costs.ModelCost`
        (measured, with its provenance); models without one are shown as having no cost data
        (``default_cost`` only orders their tasks in the schedule). With ``history`` (default)
        the selected models' costs come from the project's ledger
        (:func:`backfill.run.history.model_costs`: measured by past backfills, else by
        ``backfill estimate``); ``costs=`` given for a model win.

        ``partitions_per_run``: how many consecutive partitions one task rebuilds; ``"auto"``
        decides per model from its cost so that a task carries at least ``min_task_seconds``
        (default: backfill.yml ``batching: {min_task: ...}``, else 2 s) with never fewer tasks
        than ``concurrency`` (:func:`~backfill.plan.costs.auto_partitions_per_run`). Models in
        ``unbatched`` (and landing models, whose tasks record the log positions each read) keep
        one partition per task under ``"auto"``, and so does every model when the project's
        engine cannot write several partitions in one transaction.

        A partition in progress at ``as_of`` (this year of a yearly model) has been published by
        the regular runs so far; leaving it out leaves it stale (a ``STALE_DOWNSTREAM`` warning),
        ``include_in_progress=True`` rebuilds it with the data so far. The default is the
        project's :attr:`runs_in_progress` (a dbt project: dbt runs those batches).

        Every Kafka source whose landing model the plan rebuilds has its retention checked
        (``plan.replay``; RETENTION findings). The keywords are those of
        :class:`~backfill.plan.planner.PlanOptions`."""
        return plan_with_history(self, select, start, end, history=history, **options)

    def backfill(
        self,
        plan: Plan,
        *,
        reason: str,
        direct: bool = False,
        engine: Engine | None = None,
        lint: bool = True,
        allow_overlap: str | None = None,
    ) -> Backfill:
        """Records ``plan`` as a backfill in the ledger; ``.run()`` writes it into the audit
        area (or, with ``direct=True``, straight into the published tables: initial builds).
        Refused when an open backfill writes the same partitions, unless ``allow_overlap``
        says why (:meth:`backfill.run.Backfill.create`)."""
        return Backfill.create(
            self,
            plan,
            reason=reason,
            direct=direct,
            engine=engine,
            lint=lint,
            allow_overlap=allow_overlap,
        )

    def changelog(
        self, backfill_id: str | None = None, *, since: Any = None, model: str | None = None
    ) -> Changelog:
        """Publications and forward-only changes recorded in the warehouse's
        ``backfill_changelog`` (newest first), optionally only those at or after ``since`` (ISO
        date or date-time) or touching ``model``."""
        return changelog(self, backfill_id=backfill_id, since=since, model=model)

    def forward(
        self, model: str, start: Any, *, note: str, reason: str | None = None
    ) -> ForwardChange:
        """Records that ``model`` changes from ``start`` on WITHOUT a backfill of its history
        (changelog, OpenLineage, the model's consumers), so consumers know why history did not
        change."""
        return forward_change(self, model, start, note, reason=reason)

    def rollback(
        self,
        publication_id: str,
        *,
        note: str,
        force_reason: str | None = None,
        engine: Engine | None = None,
        ledger: LedgerBackend | None = None,
    ) -> Rollback:
        """Takes the publication ``publication_id`` back: every model it changed gets back what
        it replaced (kept for ``publish: {keep: 30d}``), at once, after checking nothing was
        published over it since (``force_reason`` overwrites such changes and says which). The
        rollback is a publication: changelog entry with the deltas, consumers told, and it can
        be rolled back in turn. See :mod:`backfill.publish.rollback`."""
        from .engines.registry import engine_for
        from .run.ledger import ledger_for

        return rollback_publication(
            self,
            ledger or ledger_for(self, must_exist=True),
            engine or engine_for(self),
            publication_id,
            note,
            force_reason,
        )

    def gc(
        self,
        *,
        dry_run: bool = False,
        engine: Engine | None = None,
        ledger: LedgerBackend | None = None,
    ) -> GcReport:
        """Drops what publications kept past ``publish: {keep: ...}`` (never a backup still in
        its retention) and, on Iceberg, expires old snapshots and compacts small files. See
        :mod:`backfill.publish.gc`."""
        from .engines.registry import engine_for
        from .run.ledger import ledger_for

        return collect_garbage(
            self,
            ledger or ledger_for(self, must_exist=True),
            engine or engine_for(self),
            dry_run=dry_run,
        )

    def avoided_backfill(
        self, model: str, start: Any, *, concurrency: int = 4, sample: bool = True
    ) -> tuple[Plan, EstimateReport | None, str | None]:
        """The backfill a forward-only change (:meth:`forward`) avoids: ``model+`` from the
        model's ``begin`` (a year back without one) up to ``start``; with ``sample``, its estimate
        from one sample partition per model (:func:`backfill.run.estimate.estimate`). Returns
        (plan, estimate or None, why there is no estimate)."""
        until = parse_from(self, model, start)
        begin = self.models[model].begin or until - dt.timedelta(days=365)
        if begin >= until:
            raise InvalidInputError(
                f"from {start!r} is not after {model}'s begin ({begin.date()}): "
                "there is no history to leave unchanged"
            )
        plan = self.plan(f"{model}+", begin, until, as_of=until, concurrency=concurrency)
        if not sample:
            return plan, None, "not sampled"
        try:
            return plan, estimate(self, plan, concurrency=concurrency), None
        except BackfillError as exc:  # e.g. nothing published yet to sample from
            return plan, None, str(exc)


class BackfillDraft:
    """A plan on its way to being recorded, checked step by step so that each step can be shown
    before the next one runs (``backfill run`` prints the lint, then the estimate):
    :attr:`lint` (every planned model's static checks), :meth:`estimate` (one timed sample
    partition per model; its costs then go with the backfill, for a budget), :meth:`record`.

    >>> draft = BackfillDraft(project, project.plan("fct_daily_sales+", "2026-08-01",
    ...                                             "2026-10-29"))    # doctest: +SKIP
    >>> draft.lint_errors, draft.estimate(concurrency=4)             # doctest: +SKIP
    >>> bf = draft.record(reason="discount bug fixed", budget="3h")   # doctest: +SKIP
    """

    def __init__(self, project: _ModelProject, plan: Plan) -> None:
        self.project = project
        self.plan = plan
        self.costs: dict[str, float] | None = None  # seconds per partition, once estimated

    @functools.cached_property
    def lint(self) -> list[LintResult]:
        """The static checks (lint) of every model the plan gives tasks
        (:meth:`backfill.Project.check`)."""
        return [self.project.check(m.model) for m in self.plan.models if m.tasks]

    @property
    def lint_errors(self) -> int:
        """How many of :attr:`lint`'s findings are errors."""
        return sum(f.severity == "error" for result in self.lint for f in result.findings)

    def estimate(self, *, concurrency: int) -> EstimateReport:
        """Times one sample partition per model (into scratch schemas) and keeps the measured
        costs for :meth:`record`."""
        report = estimate(self.project, self.plan, concurrency=concurrency)
        self.costs = {s.model: s.seconds for s in report.samples}
        return report

    def record(
        self, *, engine: Engine | None = None, ledger: LedgerBackend | None = None, **options: Any
    ) -> Backfill:
        """Records the plan as a backfill; ``options`` are those of
        :class:`backfill.run.CreateOptions`, ``costs`` defaulting to the estimate's."""
        if self.costs is not None:
            options.setdefault("costs", self.costs)
        return Backfill.create(self.project, self.plan, engine=engine, ledger=ledger, **options)


def load(project: _ModelProject | str | Path | None) -> _ModelProject:
    """``project`` itself, or the project at that directory (default: the current one)."""
    if isinstance(project, _ModelProject):
        return project
    return Project.load(Path.cwd() if project is None else project)


class Backfill(_RunBackfill):
    """A backfill recorded in the ledger. Create with :meth:`Project.backfill`; reopen with
    :meth:`Backfill.resume` (or :meth:`Backfill.open` to only look)."""

    @classmethod
    def open(
        cls,
        backfill_id: str | None = None,
        *,
        project: _ModelProject | str | Path | None = None,
        engine: Engine | None = None,
        ledger: LedgerBackend | None = None,
    ) -> Backfill:
        """The backfill ``backfill_id`` (default: the latest) of ``project`` (a Project or its
        directory; default the current directory)."""
        return super().open(backfill_id, project=load(project), engine=engine, ledger=ledger)

    @classmethod
    def resume(
        cls,
        backfill_id: str,
        *,
        project: _ModelProject | str | Path | None = None,
        engine: Engine | None = None,
        ledger: LedgerBackend | None = None,
        accept_changed_sql: str | None = None,
    ) -> Backfill:
        """Reopens a backfill to run what is not done: failed tasks get fresh attempts, tasks of a
        dead worker are claimed again when its lease ends. Call ``.run()`` on the result.
        Refuses when a model's SQL changed since planning, unless ``accept_changed_sql`` says
        why (see :meth:`backfill.run.Backfill.check_sql`)."""
        return super().resume(
            backfill_id,
            project=load(project),
            engine=engine,
            ledger=ledger,
            accept_changed_sql=accept_changed_sql,
        )

    def audit(
        self,
        gates: Mapping[str, Any] | None = None,
        *,
        against: str | Mapping[str, str] | None = None,
        key: Sequence[str] | None = None,
    ) -> AuditReport:
        """Diffs every model's audit version against the published one and checks the gates
        (backfill.yml ``audits`` plus ``gates``); recorded in the ledger.

        ``against`` compares what the backfill wrote with tables elsewhere instead (a
        migration's old system): ``{model: location}`` (``duckdb:///file#schema.table``,
        ``postgresql://...#schema.table``, Parquet), or one location when the backfill rebuilt
        one model; ``key`` overrides the model's key (one model). Only ``gates`` are checked;
        not recorded (see :mod:`backfill.audit.against`)."""
        if against is not None:
            return audit_against(self, against, gates, key)
        if key is not None:
            raise InvalidInputError(
                "key= applies with against=; the audit against the published version matches "
                "rows on the model's unique_key or natural key"
            )
        return audit_backfill(self, gates)

    def publish(self, note: str, *, force_reason: str | None = None) -> Publication:
        """Swaps every backfilled partition into the published tables (atomically, as the
        engine declares) and writes the changelog; refuses on a failed gate (unless forced) or a
        stale audit."""
        return publish_backfill(self, note, force_reason)

    def discard(self) -> None:
        """Drops the audit area of this unpublished backfill."""
        discard_backfill(self)
