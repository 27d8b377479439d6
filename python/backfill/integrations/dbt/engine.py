"""The dbt engine: backfill tasks run as ``dbt run`` invocations on a dbt-duckdb or dbt-postgres
warehouse (the profile's target type; the Postgres steps are in :mod:`.postgres`).

A task of a microbatch model becomes
``dbt run --select <model> --event-time-start <a> --event-time-end <b>``; a task of a table,
view or other incremental model a plain ``dbt run --select <model>`` (``--full-refresh`` for a
non-microbatch incremental model: a backfill rebuilds it whole) after its inputs.

Write-audit-publish. A backfill into an audit area runs dbt with a generated profile whose
schema is ``audit_<id>_dbt`` (the *work* schema). Before the first task, the work schema gets a
copy of each backfilled microbatch model's published table and a view on the published relation
of every other model or seed a backfilled model reads, so that dbt's ``ref()`` in the work schema
sees the new rows in the backfilled periods and the published rows elsewhere: a monthly batch
over a half-rebuilt month, or a table over all days, reads exactly what it would after publish.
After each batch (or table build) the engine copies the rebuilt rows into ``audit_<id>``, which
then holds only the backfilled periods: audit and publish go to the DuckDB (or Postgres)
warehouse the engine holds, unchanged. A direct backfill (initial build) runs dbt with the
user's target.

Writer and warehouse. This engine only *writes* (through dbt); what the warehouse *keeps* is a
:class:`~backfill.engines.sql.SqlEngine` (DuckDB or Postgres, after the profile's target type):
seeding the work schema, copying batches into the audit area, fingerprints, audit, publish and
the changelog are that engine's public operations, whatever its dialect.

Grouping. dbt's runner is process-wide state, so invocations are serialized (one at a time per
process). The project is parsed once per backfill (:mod:`.reuse`); an invocation still costs
about 0.3 s on top of its batches (dbt's set-up: adapter, schemas, relation cache, macro
contexts, plugin discovery). So the engine declares ``capabilities.task_group`` (64): a runner
claims that many ready tasks per unit of concurrency, in rounds, and hands them over at once;
one invocation runs every waiting task that dbt can run together (:mod:`.group`: consecutive
batches of a model as one ``--event-time-start/--event-time-end`` range, with independent
models over the same range or rebuilt whole). Each batch's outcome comes back from dbt's
``batch_results``, so failures are still recorded (and retried) per task; a model's rows go to
the audit area in one transaction (:mod:`.audit_copy`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ...engines import (
    Area,
    Column,
    Engine,
    Number,
    Part,
    PartitionFingerprint,
    Period,
    PublishRequest,
    PublishResult,
    TaskFailure,
    WriteResult,
)
from ...engines.duckdb import DuckDBEngine
from ...engines.sql import Rel, SqlEngine, audit_schema
from ...errors import InvalidInputError, NotFoundError
from ...model import EngineSettings
from .group import Pending, Request, full_refresh
from .invoke import invoke, invoke_lock
from .outcome import PERMANENT, outcome
from .outcome import utc as _utc
from .profile import GENERATED_TARGET, DbtProfile, read_profile, write_profile
from .reuse import ManifestCache

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project

log = logging.getLogger(__name__)

__all__ = ["DbtEngine", "work_schema"]


def work_schema(backfill_id: str) -> str:
    """The schema dbt writes a backfill into (refs resolve there)."""
    return f"{audit_schema(backfill_id)}_dbt"


def _arg(t: dt.datetime) -> str:
    """dbt's --event-time-* form; dbt reads naive values as UTC."""
    return _utc(t).strftime("%Y-%m-%dT%H:%M:%S")


class DbtEngine(Engine):
    """Runs a dbt-duckdb project's models through dbt (see the module docstring).

    ``project_dir`` holds dbt_project.yml; ``profiles_dir`` and ``target`` choose the profile
    (default: the project's profiles.yml or ~/.dbt, the profile's default target);
    ``state_dir`` holds generated profiles and dbt's target directories (default
    ``<project>/.backfill``). ``gather`` seconds: how long an invocation waits for sibling
    tasks to group before it starts, when the caller did not announce how many are coming
    (a runner does: :meth:`expect`; an orchestrator handing tasks over one call each does not).
    """

    name = "dbt"
    # a runner hands over up to 64 claimed tasks at once: few invocations (see Grouping)
    capabilities = replace(DuckDBEngine.capabilities, multi_partition_tasks=False, task_group=64)

    def __init__(
        self,
        project_dir: str | Path,
        *,
        profiles_dir: str | Path | None = None,
        target: str | None = None,
        state_dir: str | Path | None = None,
        gather: float = 0.03,
        **options: Any,
    ) -> None:
        self.project_dir = Path(project_dir).resolve()
        self.profile: DbtProfile = read_profile(self.project_dir, profiles_dir, target)
        self._project: Project | None = None  # the dbt project last seen (names relations)
        #: the warehouse dbt writes: audit, publish and the changelog run on it unchanged
        self.warehouse: SqlEngine
        if self.profile.url is not None:
            from ...engines.postgres import PostgresEngine

            self.warehouse = PostgresEngine(
                self.profile.url, schema=self.profile.schema, naming=self.published, **options
            )
        else:
            assert self.profile.path is not None
            self.warehouse = DuckDBEngine(
                self.profile.path, schema=self.profile.schema, naming=self.published, **options
            )
        self.state_dir = Path(state_dir) if state_dir else self.project_dir / ".backfill"
        self.gather = gather
        self._concurrent = False  # tasks have waited together: gather siblings before invoking
        self._waiting = Pending()
        self._prepared: set[str] = set()
        self.manifests = ManifestCache(self.project_dir, GENERATED_TARGET)  # parsed once
        self.invocations = 0  # dbt invocations made (for tests and benchmarks)
        self.dbt_seconds = 0.0

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> DbtEngine:
        """The engine of a project imported with ``Project.from_dbt`` (``type: dbt``)."""
        return cls(**dict(settings.options))

    @property
    def schema(self) -> str:
        return self.profile.schema

    @property
    def on_postgres(self) -> bool:
        return self.profile.url is not None

    def __repr__(self) -> str:
        return (
            f"DbtEngine({str(self.project_dir)!r}, target={self.profile.target!r}, "
            f"warehouse={self.warehouse!r})"
        )

    def _wh(self, project: Project) -> Engine:
        """The warehouse, knowing ``project`` (its manifest names the published relations)."""
        self._project = project
        return self.warehouse

    def close(self) -> None:
        self.warehouse.close()

    # -- naming ---------------------------------------------------------------------------------
    @staticmethod
    def _node(project: Project, model: str) -> Any:
        info = getattr(project, "dbt", {}).get(model)
        if info is None:
            raise NotFoundError(f"{model!r} is not a node of a dbt project")
        return info

    def _schema_in(self, node_schema: str | None, base: str) -> str:
        """The schema dbt's default generate_schema_name gives a node under target schema
        ``base`` (``<base>_<custom>`` for a custom schema)."""
        published = self.profile.schema
        if node_schema in (None, published):
            return base
        assert node_schema is not None
        if node_schema.startswith(published + "_"):
            return base + node_schema[len(published) :]
        raise InvalidInputError(
            f"schema {node_schema!r} is not the target schema {published!r} nor "
            f"{published}_<custom>: a generate_schema_name override is not supported by the "
            "dbt engine"
        )

    def published(self, project: Project | None, model: str) -> Rel:
        """The published (schema, name) of ``model``: dbt's schema and alias from the
        manifest (the warehouse's naming)."""
        info = getattr(project if project is not None else self._project, "dbt", {}).get(model)
        if info is None:
            return (self.schema, model)
        return (info.schema or self.schema, info.alias or model)

    def work_relation(self, project: Project, model: str, area: Area) -> Rel:
        """Where dbt writes ``model`` in ``area`` (its target relation)."""
        info = self._node(project, model)
        if area.direct:
            return self.published(project, model)
        schema = self._schema_in(info.schema, work_schema(str(area.backfill_id)))
        return (schema, info.alias or model)

    # -- dbt invocations ----------------------------------------------------------------------
    def _profiles(self, area: Area) -> tuple[Path, Path]:
        """(profiles dir, target path) for the area's invocations."""
        key = "direct" if area.direct else str(area.backfill_id)
        base = self.state_dir / "dbt" / key
        schema = self.schema if area.direct else work_schema(str(area.backfill_id))
        return write_profile(self.profile, base, schema=schema), base / "target"

    def _invoke(self, args: list[str], area: Area) -> Any:
        profiles, target_path = self._profiles(area)
        began = time.perf_counter()
        with invoke_lock:
            if self.warehouse.capabilities.embedded:
                self.close()  # a file (DuckDB): dbt needs it; our handle is reopened after
            # results come back as objects: writing them as JSON was 13% of an invocation
            res = invoke(
                [*args, "--no-write-json"],
                project_dir=self.project_dir,
                profiles_dir=profiles,
                target=GENERATED_TARGET,
                target_path=target_path,
                check=False,
                manifest=self.manifests.get(profiles, target_path),
            )
            self.invocations += 1
        self.dbt_seconds += time.perf_counter() - began
        return res

    def _prepare(self, project: Project, area: Area) -> None:
        """Seeds the work schema: copies of backfilled microbatch tables, views on the rest."""
        if area.direct or str(area.backfill_id) in self._prepared:
            return
        for model in area.periods:
            how = "table" if project.models[model].grain else "schema"
            self.warehouse.seed(
                self.work_relation(project, model, area), self.published(project, model), how
            )
        for parent in self._parents_read(project, area):
            self.warehouse.seed(
                self.work_relation(project, parent, area), self.published(project, parent), "view"
            )
        self._prepared.add(str(area.backfill_id))

    def _parents_read(self, project: Project, area: Area) -> list[str]:
        """Models and seeds the backfilled models read that are not backfilled themselves
        (sources and ephemeral models aside): the work schema gets views on them."""
        reads = {d.parent for model in area.periods for d in project.models[model].depends_on}
        out = []
        for parent in sorted(reads - set(area.periods)):
            info = getattr(project, "dbt", {}).get(parent)
            if (
                info is None
                or info.resource_type == "source"
                or (
                    project.models.get(parent) is not None
                    and project.models[parent].meta.get("dbt", {}).get("materialized")
                    == "ephemeral"
                )
            ):
                continue
            out.append(parent)
        return out

    def expect(self, tasks: int) -> None:
        self._waiting.expect(tasks)

    def run_task(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> WriteResult:
        _require_dbt(project)
        self._project = project
        m = project.models[model]
        if m.grain and (start is None or end is None):
            raise TaskFailure(f"model {model!r}: a microbatch task needs a period", transient=False)
        req = Request(model, start, end, area)
        self._waiting.add(req)
        while not req.done.is_set():
            with invoke_lock:
                if req.done.is_set():
                    break
                # Wait for sibling tasks claimed with this one: those the runner announced
                # (expect), else by timing unless tasks have only come one at a time so far
                # (one task per claim: 30 ms per task for nothing).
                if self._concurrent or not self.invocations:
                    self._waiting.gather(self.gather)
                group = self._waiting.take(project, req)
                self._concurrent |= len(group) > 1 or bool(len(self._waiting))
                self._run_group(project, group)
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def _run_group(self, project: Project, group: list[Request]) -> None:
        area = group[0].area
        began = time.perf_counter()
        try:
            self._prepare(project, area)
            failed = self._run_once(project, group, began)
            if len(group) > 1:
                # dbt skips the batches after a failed one and reports them failed too: run
                # each of those tasks alone, so only the failing batches fail.
                for r in failed:
                    r.error = None
                    self._run_once(project, [r], time.perf_counter())
        except BaseException as exc:
            # Broad on purpose: the one invocation ran for every task of the group, so each
            # waiting task must get its failure, whatever it was. A bug keeps its type and
            # message and is permanent (_transient retries only a warehouse's errors).
            interrupted = not isinstance(exc, Exception)  # Ctrl-C, SystemExit
            for r in group:
                if r.result is None and r.error is None:
                    r.error = (
                        exc
                        if isinstance(exc, TaskFailure)
                        else TaskFailure(
                            f"model {r.model!r}: {type(exc).__name__}: {exc}",
                            transient=interrupted or self._transient(exc),
                        )
                    )
            if interrupted:
                raise  # goes on in this thread as it is (not this task's failure)
        finally:
            for r in group:
                r.done.set()

    def _run_once(self, project: Project, group: list[Request], began: float) -> list[Request]:
        """One dbt invocation for ``group`` (one or more models, see :mod:`.group`); sets each
        request's result or error and returns the failed ones."""
        models = list(dict.fromkeys(r.model for r in group))
        args = ["run", "--select", *models]
        starts = [r.start for r in group if r.start is not None]
        ends = [r.end for r in group if r.end is not None]
        if starts and ends:  # every microbatch model of the group covers this one interval
            args += ["--event-time-start", _arg(min(starts)), "--event-time-end", _arg(max(ends))]
        elif full_refresh(project, models[0]):
            args.append("--full-refresh")  # a non-microbatch incremental model: rebuilt whole
        res = self._invoke(args, group[0].area)
        seconds = (time.perf_counter() - began) / len(group)
        failed: list[Request] = []
        for model in models:
            node = next(
                (
                    r
                    for r in (getattr(res.result, "results", None) or [])
                    if getattr(r.node, "name", None) == model
                ),
                None,
            )
            failed_batches, message = outcome(res, node, model)
            ok = []
            for r in group:
                if r.model != model:
                    continue
                bad = [
                    b
                    for b in failed_batches
                    if r.start is None
                    or r.end is None
                    or (b[0] < _utc(r.end) and b[1] > _utc(r.start))
                ]
                if message is not None and (r.start is None or bad or not failed_batches):
                    r.error = TaskFailure(
                        message, transient=not any(p in message for p in PERMANENT)
                    )
                    failed.append(r)
                else:
                    ok.append(r)
            if ok:
                self._copy_to_audit(project, ok, seconds)
        return failed

    def _copy_to_audit(self, project: Project, ok: list[Request], seconds: float) -> None:
        """Copies what dbt wrote for the requests of one model into the audit area
        (``audit_<id>``) in one transaction, and fingerprints each request's period (a direct
        run: fingerprints what dbt wrote in place)."""
        m = project.models[ok[0].model]
        area = ok[0].area
        work = self.work_relation(project, m.name, area)
        target = work if area.direct else self.warehouse.location(project, m.name, area)
        windows = [(r.start, r.end) for r in ok]
        periods = None
        if m.event_time and all(s is not None and e is not None for s, e in windows):
            periods = cast("list[Period]", windows)
        copied = self.warehouse.copy_periods(target, work, m.event_time, periods)
        if periods is None:
            copied = copied * len(ok)
        for r, (deleted, fp) in zip(ok, copied, strict=True):
            r.result = WriteResult(fp.rows, deleted, fp, seconds)

    def _transient(self, exc: BaseException) -> bool:
        """A warehouse error worth a retry (a lost connection, a lock): never a bug."""
        found = self.warehouse.task_failure("", exc) if isinstance(exc, Exception) else None
        return found is not None and found.transient

    # -- dbt's SQL; everything else on the warehouse ---------------------------------------------
    def render(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> str:
        """The model's SQL compiled by dbt for ``area``'s target (``dbt compile``)."""
        _require_dbt(project)
        res = self._invoke(["compile", "--select", model], area)
        for r in getattr(res.result, "results", None) or []:
            if getattr(r.node, "name", None) == model:
                return str(r.node.compiled_code)
        raise TaskFailure(
            f"model {model!r}: dbt compile returned no SQL: {res.exception}", transient=False
        )

    def drop_area(self, backfill_id: str) -> None:
        """Drops the audit schema and dbt's work schemas of the backfill."""
        prefix = work_schema(backfill_id)
        self.warehouse.drop_schemas([audit_schema(backfill_id), prefix], prefix + "_")
        self._prepared.discard(backfill_id)

    def columns(self, project: Project, model: str, area: Area) -> list[Column] | None:
        return self._wh(project).columns(project, model, area)

    def fingerprints(
        self,
        project: Project,
        model: str,
        area: Area,
        parts: Sequence[Part],
        *,
        preview: bool = False,
    ) -> dict[str, PartitionFingerprint]:
        return self._wh(project).fingerprints(project, model, area, parts, preview=preview)

    def measure_sums(
        self,
        project: Project,
        model: str,
        area: Area,
        measures: Sequence[str],
        periods: Sequence[Period] | None,
        *,
        preview: bool = False,
    ) -> dict[str, Number | None]:
        return self._wh(project).measure_sums(
            project, model, area, measures, periods, preview=preview
        )

    def is_unique(
        self,
        project: Project,
        model: str,
        area: Area,
        columns: Sequence[str],
        periods: Sequence[Period] | None,
        *,
        preview: bool = False,
    ) -> bool:
        return self._wh(project).is_unique(project, model, area, columns, periods, preview=preview)

    def stream(
        self,
        project: Project,
        model: str,
        area: Area,
        periods: Sequence[Period] | None,
        *,
        preview: bool = False,
        utc_column: str | None = None,
    ) -> contextlib.AbstractContextManager[Any]:
        return self._wh(project).stream(
            project, model, area, periods, preview=preview, utc_column=utc_column
        )

    def table_rows(self, schema: str, table: str) -> contextlib.AbstractContextManager[Any]:
        return self.warehouse.table_rows(schema, table)

    def published_table(self, project: Project | None, name: str, location: str) -> Any:
        """The published table of the dbt model ``name`` (dbt's schema and alias) or
        ``schema.table``, opened by the warehouse engine."""
        if project is not None:
            self._project = project
        return self.warehouse.published_table(project, name, location)

    def area_table(self, project: Project, model: str, area: Area) -> Any:
        """The model's relation in ``area`` (its audit copy), opened by the warehouse engine."""
        return self._wh(project).area_table(project, model, area)

    def publish(self, project: Project, request: PublishRequest) -> PublishResult:
        _require_dbt(project)
        return self._wh(project).publish(project, request)

    def drop_backup(self, publication_id: str) -> None:
        self.warehouse.drop_backup(publication_id)

    def backup_rows(self, publication_id: str) -> int | None:
        return self.warehouse.backup_rows(publication_id)

    def changelog_rows(
        self,
        project: Project,
        backfill_id: str | None = None,
    ) -> list[tuple[Any, ...]]:
        return self._wh(project).changelog_rows(project, backfill_id)


def _require_dbt(project: Project) -> None:
    if getattr(project, "manifest", None) is None:
        raise InvalidInputError(
            f"the dbt engine runs dbt projects; {project!r} is not one "
            "(load it with Project.from_dbt)"
        )
