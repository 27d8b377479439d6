"""The DuckDB engine: a database file (default ``warehouse.duckdb`` in the project).

Published models live in one schema (``main``); backfill ``bf_...`` writes into the schema
``audit_bf_...``. Inside an audit area ``ref("m")`` to a model the backfill rebuilds reads

    (SELECT * FROM audit.m UNION ALL BY NAME
     SELECT * FROM main.m WHERE NOT (event_time in the backfilled periods))

so a rolling model on 1 Aug reads 26-31 Jul from published data and 1 Aug from the audit area,
with filters pushed into both sides: cost follows the backfilled periods, never a table copy.

One writer process per file (see :mod:`.connection`): runners on one file take turns; for real
parallelism across processes use one process with ``concurrency`` threads. A reader holding the
file open (a notebook, a BI tool) blocks writers the same way: the task waits up to
``lock_timeout``, then fails as transient and is retried with backoff. A process killed mid-task
leaves an uncommitted transaction that DuckDB discards on next open.

Publish is one DuckDB transaction for every model and the changelog rows (``atomic_publish``):
readers use snapshot isolation and see all old or all new.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..._numbers import Number
from ...calendar import partitions as calendar_partitions
from ...errors import InvalidInputError, NotFoundError
from ...model.files import EngineSettings, render
from ..base import (
    Area,
    Capabilities,
    Column,
    DeadLetters,
    Engine,
    Part,
    PartitionFingerprint,
    Period,
    PublishRequest,
    TaskFailure,
    WriteResult,
    model_location,
    project_model,
)
from . import publish as _publish
from .connection import SharedDatabase
from .scope import Scopes
from .sql import (
    audit_schema,
    fingerprint_parts,
    fingerprint_where,
    in_periods,
    kind_of,
    one,
    quote,
    relation_exists,
    transaction,
)
from .write import schema_changed, write_replace

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Model, Project

log = logging.getLogger(__name__)

__all__ = ["DuckDBEngine"]

#: (project, model) -> the quoted published relation of the model
Naming = Callable[["Project | None", str], str]


class DuckDBEngine(Engine):
    """DuckDB warehouse at ``path``; published models in ``schema``.

    ``keep_open=True`` holds the file for the engine's lifetime (faster for one process; other
    processes then wait); otherwise it is closed ``linger`` seconds after the last task ends.
    ``conflict_retries`` bounds retries of write-write conflicts between concurrent transactions
    of this process. ``naming`` names the published relation of a model (default
    ``"<schema>"."<model>"``; a dbt project names them after its manifest).
    """

    name = "duckdb"
    capabilities = Capabilities(atomic_publish=True, embedded=True, landing=True, interrupt=True)

    def __init__(
        self,
        path: str | Path,
        *,
        schema: str = "main",
        lock_timeout: float = 120.0,
        keep_open: bool = False,
        linger: float = 0.05,
        conflict_retries: int = 30,
        naming: Naming | None = None,
    ) -> None:
        self.path = Path(path)
        self.schema = schema
        self.conflict_retries = conflict_retries
        self._naming = naming
        self._db = SharedDatabase(self.path, lock_timeout, keep_open, linger)
        self._tmp_counter = 0
        self._tmp_lock = threading.Lock()
        self._scopes = Scopes()

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> DuckDBEngine:
        """The engine ``engine: {type: duckdb, ...}`` of backfill.yml names."""
        return cls(settings.path, schema=settings.schema, **dict(settings.options))

    def __repr__(self) -> str:
        return f"DuckDBEngine({str(self.path)!r}, schema={self.schema!r})"

    @contextlib.contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on the warehouse (the file is held until the block ends)."""
        with self._db.cursor() as cur:
            yield cur

    def close(self) -> None:
        self._db.close()

    def interrupt(self) -> None:
        self._db.interrupt()

    # -- naming and rendering ------------------------------------------------------------------
    def published(self, model: str, project: Project | None = None) -> str:
        """The quoted published relation of ``model``."""
        if self._naming is not None:
            return self._naming(project, model)
        return f"{quote(self.schema)}.{quote(model)}"

    def relation(self, model: str, area: Area, project: Project | None = None) -> str:
        """The quoted relation ``model`` is written to in ``area``."""
        if area.direct:
            return self.published(model, project)
        return f"{quote(audit_schema(str(area.backfill_id)))}.{quote(model)}"

    def _ref(
        self, project: Project, area: Area, cur: duckdb.DuckDBPyConnection | None, name: str
    ) -> str:
        """What a read of ``name`` sees in ``area``: the backfill's new rows for its periods and
        the published rows elsewhere (the new table alone for full rebuilds)."""
        published = self.published(name, project)
        if area.direct or name not in area.periods:
            return published
        model = project.models[name]
        audit = self.relation(name, area, project)
        has_published = cur is None or relation_exists(cur, published)
        has_audit = cur is None or relation_exists(cur, audit)
        if model.strategy in ("full", "view") or not model.event_time:
            return audit if has_audit or not has_published else published
        if not has_published:
            return audit
        keep = in_periods(model.event_time, area.periods[name])
        outside = f"SELECT * FROM {published} WHERE NOT coalesce({keep}, FALSE)"
        if not has_audit:  # no new rows written yet
            return f"({outside})"
        return f"(SELECT * FROM {audit} UNION ALL BY NAME {outside})"

    def _render(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
        cur: duckdb.DuckDBPyConnection | None,
    ) -> str:
        m = project_model(project, model)
        where = model_location(project, model)

        def ref(name: str, **_: object) -> str:
            if name not in project.models:
                raise NotFoundError(f"ref({name!r}) names no model")
            return self._ref(project, area, cur, name)

        def source(schema: str, table: str) -> str:
            return f"{quote(schema)}.{quote(table)}"

        def is_incremental() -> bool:
            return (
                cur is None
                or relation_exists(cur, self.published(model, project))
                or (not area.direct and relation_exists(cur, self.relation(model, area, project)))
            )

        # Only a template naming `this` needs it (resolving it costs catalog queries a task).
        this = (
            ""
            if "this" not in (m.sql or "")
            else self._ref(project, area, cur, model)
            if not area.direct
            else self.relation(model, area, project)
        )
        return render(
            m.sql or "",
            start=start,
            end=end,
            ref=ref,
            source=source,
            this=this,
            is_incremental=is_incremental,
            where=where,
        )

    def render(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> str:
        with self.connect() as cur:
            return self._render(project, model, start, end, area, cur)

    # -- writing ------------------------------------------------------------------------------
    def run_task(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> WriteResult:
        return self._run(project, model, start, end, area, None)

    def land(
        self,
        project: Project,
        model: str,
        start: dt.datetime,
        end: dt.datetime,
        area: Area,
        rows: Any,
        dead_letters: DeadLetters | None = None,
    ) -> WriteResult:
        return self._run(project, model, start, end, area, rows, dead_letters)

    def _run(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
        rows: Any,
        dead_letters: DeadLetters | None = None,
    ) -> WriteResult:
        m = project_model(project, model)
        began = time.perf_counter()
        conflicts = 0
        delay = 0.005
        while True:
            try:
                with self.connect() as cur:
                    written, deleted, fp, parts = self._write(
                        cur, project, m, start, end, area, rows, dead_letters
                    )
                return WriteResult(
                    written, deleted, fp, time.perf_counter() - began, conflicts, parts or None
                )
            except duckdb.TransactionException as exc:
                if _no_space(exc):  # a failed commit: not a conflict, retrying cannot help
                    raise self._disk_full(project, model, exc) from None
                conflicts += 1
                if conflicts > self.conflict_retries:
                    raise TaskFailure(
                        f"{model_location(project, model)}: gave up after {conflicts} "
                        f"write conflicts: {exc}",
                        transient=True,
                    ) from None
                log.debug("%s: write conflict, retrying: %s", model, exc)
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)
            except (
                duckdb.ParserException,
                duckdb.BinderException,
                duckdb.CatalogException,
                duckdb.ConversionException,
                duckdb.InvalidInputException,
                duckdb.ConstraintException,
            ) as exc:
                raise TaskFailure(
                    f"{model_location(project, model)}: SQL error: {exc}", transient=False
                ) from None
            except duckdb.Error as exc:
                if _no_space(exc):
                    raise self._disk_full(project, model, exc) from None
                raise TaskFailure(
                    f"{model_location(project, model)}: {type(exc).__name__}: {exc}", transient=True
                ) from None

    def _disk_full(self, project: Project, model: str, exc: BaseException) -> TaskFailure:
        # Permanent for this run: retries within seconds would fail the same way, and each
        # would grow nothing but the log. The transaction rolled back: nothing was written.
        return TaskFailure(
            f"{model_location(project, model)}: the disk holding {self.path} is full (No space "
            f"left on device) while writing; nothing of this task was committed. Free space on "
            f"that disk (or move the warehouse), then resume the backfill (backfill run "
            f"--resume ID). DuckDB said: {exc}",
            transient=False,
        )

    def _tmp_name(self) -> str:
        with self._tmp_lock:
            self._tmp_counter += 1
            return f"__backfill_new_{self._tmp_counter}"

    def _write(
        self,
        cur: duckdb.DuckDBPyConnection,
        project: Project,
        m: Model,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
        rows: Any = None,
        dead_letters: DeadLetters | None = None,
    ) -> tuple[int, int, PartitionFingerprint, Mapping[str, PartitionFingerprint]]:
        """Writes the task's period: the model's rendered SELECT, or ``rows`` (Arrow) landed;
        (rows written, rows deleted, fingerprint of the period, fingerprint per partition when
        the write computed them)."""
        target = self.relation(m.name, area, project)
        schema = target.rsplit(".", 1)[0]
        tmp = quote(self._tmp_name())
        # replace/merge/append write one period; full and view rebuild the whole relation.
        partitioned = (
            start is not None and end is not None and m.strategy in ("replace", "merge", "append")
        )
        if m.strategy in ("replace", "merge", "append") and m.grain and not partitioned:
            raise TaskFailure(
                f"{model_location(project, m.name)}: a {m.strategy} task needs a period",
                transient=False,
            )
        with transaction(cur):
            if rows is None:
                sql = self._render(project, m.name, start, end, area, cur)
                if (
                    partitioned
                    and m.strategy == "replace"
                    and m.event_time
                    and dead_letters is None
                ):
                    assert start is not None and end is not None
                    return write_replace(
                        cur,
                        target,
                        sql,
                        m.event_time,
                        start,
                        end,
                        model_location(project, m.name),
                        _task_parts(m, start, end),
                    )
            else:  # the cursor's own registration: other threads' cursors never see it
                landed = self._tmp_name() + "_landed"
                cur.register(landed, rows)
                sql = f"SELECT * FROM {quote(landed)}"
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            if m.strategy == "view":
                cur.execute(f"CREATE OR REPLACE VIEW {target} AS {sql}")
                fp = fingerprint_where(cur, target)
                return fp.rows, 0, fp, {}
            cur.execute(f"CREATE TEMP TABLE {tmp} AS {sql}")
            in_period = ""
            if partitioned:
                assert start is not None and end is not None and m.event_time
                in_period = in_periods(m.event_time, [(start, end)])
                outside = one(
                    cur, f"SELECT count(*) FROM {tmp} WHERE NOT coalesce({in_period}, FALSE)"
                )
                if outside:
                    raise TaskFailure(
                        f"{model_location(project, m.name)}: the SELECT returned {outside} row(s) with "
                        f"{m.event_time} outside the task's period [{start:%Y-%m-%d %H:%M}, "
                        f"{end:%Y-%m-%d %H:%M}) UTC (or NULL); a task writes exactly its period: "
                        "filter the inputs with {{ start }} and {{ end }}",
                        transient=False,
                    )
            new_rows = one(cur, f"SELECT count(*) FROM {tmp}")
            deleted = 0
            if m.strategy == "full" or not partitioned:
                cur.execute(f"CREATE OR REPLACE TABLE {target} AS SELECT * FROM {tmp}")
            else:
                cur.execute(f"CREATE TABLE IF NOT EXISTS {target} AS SELECT * FROM {tmp} LIMIT 0")
                _check_columns(cur, project, m.name, tmp, target)
                if m.strategy == "replace":
                    deleted = one(cur, f"SELECT count(*) FROM {target} WHERE {in_period}")
                    cur.execute(f"DELETE FROM {target} WHERE {in_period}")
                elif m.strategy == "merge":  # upsert on the unique key
                    keys = ", ".join(quote(k) for k in m.unique_key)
                    deleted = one(
                        cur,
                        f"SELECT count(*) FROM {target} WHERE ({keys}) IN "
                        f"(SELECT ({keys}) FROM {tmp})",
                    )
                    cur.execute(
                        f"DELETE FROM {target} WHERE ({keys}) IN (SELECT ({keys}) FROM {tmp})"
                    )
                # append deletes nothing: running it twice doubles the period (the planner
                # refuses append models unless allow_append).
                cur.execute(f"INSERT INTO {target} BY NAME SELECT * FROM {tmp}")
            fp = fingerprint_where(cur, target, in_period or "TRUE")
            cur.execute(f"DROP TABLE {tmp}")
            if rows is not None:
                cur.unregister(landed)
            if dead_letters is not None and start is not None and end is not None:
                self._dead_letters(cur, project, dead_letters, start, end)
        return new_rows, deleted, fp, {}

    def _dead_letters(
        self,
        cur: duckdb.DuckDBPyConnection,
        project: Project,
        dl: DeadLetters,
        start: dt.datetime,
        end: dt.datetime,
    ) -> None:
        """Replaces the period's dead letters of the topic (see :meth:`Engine.land`)."""
        target = self.published(dl.table, project)
        name = self._tmp_name() + "_dead"
        cur.register(name, dl.rows)
        try:
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {target.rsplit('.', 1)[0]}")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {target} AS SELECT * FROM {quote(name)} LIMIT 0"
            )
            cur.execute(
                f"DELETE FROM {target} WHERE topic = ? AND "
                f"{in_periods('record_timestamp', [(start, end)])}",
                [dl.topic],
            )
            cur.execute(f"INSERT INTO {target} BY NAME SELECT * FROM {quote(name)}")
        finally:
            cur.unregister(name)

    def drop_area(self, backfill_id: str) -> None:
        with self.connect() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {quote(audit_schema(backfill_id))} CASCADE")

    # -- inspecting -----------------------------------------------------------------------------
    def _source(
        self,
        cur: duckdb.DuckDBPyConnection,
        project: Project,
        model: str,
        area: Area,
        preview: bool,
    ) -> str | None:
        """The relation (or query) holding ``model``'s rows in ``area``; None when missing."""
        rel = self.relation(model, area, project)
        if not relation_exists(cur, rel):
            return None
        m = project_model(project, model)
        periods = area.periods.get(model) or []
        if not (
            preview
            and not area.direct
            and m.strategy == "merge"
            and m.unique_key
            and m.event_time
            and periods
        ):
            return rel
        pub = self.published(model, project)
        if not relation_exists(cur, pub):
            return rel
        # What publish leaves: a merge upserts on the key, so published rows of the periods
        # whose key the new run did not produce stay.
        keys = ", ".join(quote(k) for k in m.unique_key)
        return (
            f"(SELECT * FROM {rel} UNION ALL BY NAME SELECT * FROM {pub} WHERE "
            f"{in_periods(m.event_time, periods)} AND ({keys}) NOT IN "
            f"(SELECT ({keys}) FROM {rel}))"
        )

    def _where_periods(self, project: Project, model: str, periods: Sequence[Period] | None) -> str:
        if periods is None:
            return "TRUE"
        m = project_model(project, model)
        if not m.event_time:
            raise InvalidInputError(f"model {model!r} has no event_time to select periods by")
        return in_periods(m.event_time, periods)

    def columns(self, project: Project, model: str, area: Area) -> list[Column] | None:
        with self.connect() as cur:
            rel = self._source(cur, project, model, area, preview=False)
            if rel is None:
                return None
            desc = cur.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()
        return [Column(str(r[0]), str(r[1]), kind_of(str(r[1]))) for r in desc]

    def fingerprints(
        self,
        project: Project,
        model: str,
        area: Area,
        parts: Sequence[Part],
        *,
        preview: bool = False,
    ) -> dict[str, PartitionFingerprint]:
        m = project_model(project, model)
        if parts and not m.event_time:
            raise InvalidInputError(f"model {model!r} has no event_time to partition by")
        with self.connect() as cur:
            rel = self._source(cur, project, model, area, preview)
            if rel is None:
                return {
                    label: PartitionFingerprint.empty()
                    for label in ([p[0] for p in parts] or ["all"])
                }
            scope = self._scopes.get(model, parts)
            if scope is not None and m.event_time:  # its measures' sums from the same scan
                return scope.fingerprints(cur, rel, m.event_time)
            return fingerprint_parts(cur, rel, m.event_time, parts)

    @contextlib.contextmanager
    def audit_scope(
        self,
        project: Project,
        model: str,
        areas: Sequence[Area],
        parts: Sequence[Part],
        measures: Sequence[str],
        keys: Sequence[Sequence[str]],
    ) -> Iterator[None]:
        self._scopes.open(model, parts, measures)
        try:
            yield
        finally:
            self._scopes.close()

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
        if not measures:
            return {}
        where = self._where_periods(project, model, periods)
        with self.connect() as cur:
            rel = self._source(cur, project, model, area, preview)
            if rel is None:
                return dict.fromkeys(measures)
            scope = self._scopes.get(model)
            found = scope.measure_sums(rel, measures, periods) if scope else None
            if found is not None:
                return found
            # DuckDB sums DECIMAL(p, s) to DECIMAL(38, s) and integers to HUGEINT, exactly:
            # Decimal and int here; floats stay DOUBLE.
            sums = ", ".join(f"sum({quote(c)})" for c in measures)
            row = cur.execute(f"SELECT {sums} FROM {rel} WHERE {where}").fetchone()
        return {c: (None if row is None else row[i]) for i, c in enumerate(measures)}

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
        where = self._where_periods(project, model, periods)
        cols = ", ".join(quote(c) for c in columns)
        nonnull = " AND ".join(f"{quote(c)} IS NOT NULL" for c in columns)
        with self.connect() as cur:
            rel = self._source(cur, project, model, area, preview)
            if rel is None:
                return True
            row = cur.execute(
                f"SELECT count(*), count(DISTINCT ({cols})), count(*) FILTER "
                f"(WHERE {nonnull}) FROM {rel} WHERE {where}"
            ).fetchone()
        return row is not None and row[0] == row[1] == row[2]

    @contextlib.contextmanager
    def stream(
        self,
        project: Project,
        model: str,
        area: Area,
        periods: Sequence[Period] | None,
        *,
        preview: bool = False,
        utc_column: str | None = None,
    ) -> Iterator[Any]:
        where = (
            self._where_periods(project, model, periods) if periods is None or periods else "FALSE"
        )
        m = project_model(project, model)
        with self.connect() as cur:
            rel = self._source(cur, project, model, area, preview)
            if rel is None:
                raise NotFoundError(
                    f"{model} has no table in "
                    f"{'the published schema' if area.direct else 'the area'} "
                    f"{self.relation(model, area, project)}"
                )
            select = "*"
            if utc_column:
                if not m.event_time:
                    raise InvalidInputError(f"model {model!r} has no event_time")
                select = f"*, CAST({quote(m.event_time)} AS TIMESTAMPTZ) AS {quote(utc_column)}"
            # DuckDB streams one result per connection: each stream gets its own cursor, with
            # the session's time zone set as in the engine.
            other = cur.cursor()
            try:
                other.execute("SET TimeZone = 'UTC'")
                yield other.sql(f"SELECT {select} FROM {rel} WHERE {where}")
            finally:
                other.close()

    # -- publishing -----------------------------------------------------------------------------
    def publish(self, project: Project, request: PublishRequest) -> None:
        _publish.publish(self, project, request)

    def changelog_rows(
        self,
        project: Project,
        backfill_id: str | None = None,
    ) -> list[tuple[Any, ...]]:
        return _publish.changelog_rows(self, backfill_id)


def _task_parts(m: Model, start: dt.datetime, end: dt.datetime) -> list[Part]:
    """The calendar partitions of a task's period (as the backfill lists them); none when the
    model has no grain or the period is not on its boundaries (a hand-run task)."""
    if not m.grain:
        return []
    try:
        return [
            (p.label, p.start, p.end) for p in calendar_partitions(m.grain, start, end, tz=m.tz)
        ]
    except InvalidInputError:
        return []


def _no_space(exc: BaseException) -> bool:
    """DuckDB's error for a write that found the disk full (ENOSPC)."""
    return "No space left on device" in str(exc)


def _check_columns(
    cur: duckdb.DuckDBPyConnection, project: Project, model: str, tmp: str, target: str
) -> None:
    new = [d[0] for d in cur.execute(f"SELECT * FROM {tmp} LIMIT 0").description or []]
    old = [d[0] for d in cur.execute(f"SELECT * FROM {target} LIMIT 0").description or []]
    if set(new) != set(old):
        raise schema_changed(model_location(project, model), target, new, old)
