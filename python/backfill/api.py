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

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ._extras import extra_required
from .audit import AuditReport, audit_backfill
from .engines import Engine, engine_capabilities
from .errors import InvalidInputError
from .model import PROJECT_FILE, load_project
from .model import Project as _ModelProject
from .plan import Plan
from .publish import (
    Changelog,
    ForwardChange,
    Publication,
    changelog,
    discard_backfill,
    forward_change,
    publish_backfill,
)
from .replay import check_plan, landing_models
from .run import Backfill as _RunBackfill
from .run import LedgerBackend, model_costs

__all__ = ["Backfill", "Project", "project_format"]

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
        """:meth:`backfill.model.Project.plan`, plus the retention check of every Kafka source
        whose landing model the plan rebuilds (``plan.replay``; RETENTION findings).

        With ``history`` (default) the selected models' costs come from the project's ledger
        (:func:`backfill.run.history.model_costs`: measured by past backfills, else by
        ``backfill estimate``); ``costs=`` given for a model win. Automatic batching leaves
        one partition per task when the project's engine cannot write several partitions in
        one transaction."""
        if history and self.settings is not None:
            names = self.select(select, options.get("exclude"))
            options["costs"] = {**model_costs(self, names), **(options.get("costs") or {})}
            caps = engine_capabilities(self.settings.engine)
            if caps is not None and not caps.multi_partition_tasks:
                options["unbatched"] = set(names) | set(options.get("unbatched") or ())
        plan = super().plan(select, start, end, **options)
        if landing_models(self):
            check_plan(self, plan)
        return plan

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

    def audit(self, gates: Mapping[str, Any] | None = None) -> AuditReport:
        """Diffs every model's audit version against the published one and checks the gates
        (backfill.yml ``audits`` plus ``gates``); recorded in the ledger."""
        return audit_backfill(self, gates)

    def publish(self, note: str, *, force_reason: str | None = None) -> Publication:
        """Swaps every backfilled partition into the published tables (atomically, as the
        engine declares) and writes the changelog; refuses on a failed gate (unless forced) or a
        stale audit."""
        return publish_backfill(self, note, force_reason)

    def discard(self) -> None:
        """Drops the audit area of this unpublished backfill."""
        discard_backfill(self)
