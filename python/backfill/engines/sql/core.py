"""The engine core: the whole :class:`~backfill.engines.base.Engine` interface, written once for
every SQL warehouse (DuckDB, PostgreSQL, Spark on Iceberg, and the next one).

An engine built on :class:`SqlEngine` supplies a :class:`~.dialect.Dialect` (how its SQL is
spelled) and its connection, through a handful of hooks: ``connect`` (a cursor-like object whose
``execute(sql)`` returns rows with ``fetchall``/``fetchone``), ``_columns`` and ``_kind`` (the
catalog), ``_transaction``, ``_failure`` (which errors are whose, and which are worth a retry),
``_arrow`` (a result as an Arrow stream) and the few statements whose *shape* differs between
warehouses (``_stage``, ``_stage_rows``, ``_replace_table``, ``_merge``, ``_replace_view``).
What an engine guarantees beyond that is declared in ``capabilities`` and read here, never
guessed from the engine's class.

The core holds, once:

* **areas and the ref() overlay** -- a backfill writes into the schema ``audit_<id>``; inside it
  ``ref("m")`` to a model the backfill rebuilds reads the new rows for the backfilled periods
  and the published rows elsewhere (:meth:`SqlEngine._ref`; the union is the dialect's);
* **rendering** of model templates with ref/source/this/is_incremental;
* **task writes per strategy** (replace, merge, full, view, and landed Arrow rows) in one
  transaction, rows outside the period failing the task, retries of write conflicts and the
  classification of every other error as transient or permanent;
* **inspection** -- fingerprints (row count and a sum of 64-bit row hashes, computed where the
  data lives), exact measure sums, key uniqueness, the rows of periods streamed as Arrow, and the
  audit scope that answers an audit's questions from one scan where an engine can;
* **publish** -- the stale check under the publish's lock, the swap per strategy, and the
  changelog in the same transaction; reading the changelog; and reading any table of the
  warehouse for ``backfill diff``.

Decision: statements are built as text through the dialect object, not as SQLGlot expressions.
SQLGlot is not a dependency; user model SQL is passed through unparsed and must never be
re-rendered (a transpiler would normalise what the user wrote, and its dialects lag the
engines'); and what the core generates is a dozen statement shapes whose quoting and literals
are covered by the conformance suite against each real engine. A dialect method per construct
that differs keeps each difference in one named place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._numbers import Number
from ...calendar import partitions as calendar_partitions
from ...errors import PROGRAMMING_ERRORS, ConflictError, InvalidInputError, NotFoundError
from ...fingerprints import PartitionFingerprint
from ...model.rendering import render
from ...versions import KeptModel, PublishedVersion, backup_schema, decode_models
from ..base import (
    CHANGELOG_ADDED,
    CHANGELOG_COLUMNS,
    CHANGELOG_TABLE,
    PUBLISHED,
    VERSIONS_COLUMNS,
    VERSIONS_TABLE,
    WHOLE,
    Area,
    Column,
    ColumnKind,
    DeadLetters,
    Engine,
    Part,
    Period,
    PublishModel,
    PublishRequest,
    PublishResult,
    StalePublishedError,
    TaskFailure,
    WriteResult,
    model_location,
    project_model,
)
from .audit_facts import HeldRows, answer_up_front, hold_rows
from .connection import Database
from .dialect import Dialect, Rel
from .partitions import Found, TablePartitions

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Model, Project
    from ..table_source import TableSource

log = logging.getLogger(__name__)

__all__ = [
    "AuditScope",
    "SqlEngine",
    "Written",
    "audit_schema",
    "fingerprint_parts",
    "fingerprint_where",
    "outside_failure",
    "schema_changed",
    "task_parts",
    "writes_period",
]

#: (rows written, rows deleted, fingerprint of the period, fingerprint per partition)
Written = tuple[int, int, PartitionFingerprint, Mapping[str, PartitionFingerprint]]
_STRATEGIES_WITH_PERIODS = ("replace", "merge", "append")
#: the suffix of the table keeping a merge's keys beside its kept rows
_KEYS = "__keys"


def audit_schema(backfill_id: str) -> str:
    """The schema (Spark: the branch) of a backfill's (or scratch) audit area."""
    return f"audit_{backfill_id}"


def task_parts(m: Model, start: dt.datetime, end: dt.datetime) -> list[Part]:
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


def writes_period(
    project: Project, m: Model, window: tuple[dt.datetime | None, dt.datetime | None]
) -> bool:
    """Whether a task of ``m`` over ``window`` writes one period: replace/merge/append do, full
    and view rebuild the whole relation; a period task of a model with a grain and no period
    fails."""
    partitioned = None not in window and m.strategy in _STRATEGIES_WITH_PERIODS
    if m.strategy in _STRATEGIES_WITH_PERIODS and m.grain and not partitioned:
        raise TaskFailure(
            f"{model_location(project, m.name)}: a {m.strategy} task needs a period",
            transient=False,
        )
    return partitioned


def outside_failure(
    where: str, m: Model, outside: int, start: dt.datetime, end: dt.datetime
) -> TaskFailure:
    return TaskFailure(
        f"{where}: the SELECT returned {outside} row(s) with {m.event_time} outside the "
        f"task's period [{start:%Y-%m-%d %H:%M}, {end:%Y-%m-%d %H:%M}) UTC (or NULL); a task "
        "writes exactly its period: filter the inputs with {{ start }} and {{ end }}",
        transient=False,
    )


def schema_changed(where: str, schema: str, new: Sequence[str], old: Sequence[str]) -> TaskFailure:
    """The permanent failure of a task whose SELECT's columns differ from its table's."""
    return TaskFailure(
        f"{where}: the SELECT's columns ({', '.join(new)}) differ from the table's "
        f"({', '.join(old)}) in schema {schema!r}; a partition task cannot change the "
        "schema: rebuild the model (strategy full) or backfill it into an audit area",
        transient=False,
    )


@dataclass
class AuditScope:
    """One ``audit_scope`` block (see :meth:`Engine.audit_scope`): the model, its partitions
    and announced measures and keys, and the answers found so far, keyed by question:
    ``("fp", relation, parts)``, ``("sum", relation, where, column)``, ``("unique", relation,
    where, columns)``. An engine fills it up front (one job for every question) or as it goes
    (a fingerprint scan that sums the measures too); the core serves questions from it."""

    model: str
    parts: tuple[Part, ...]
    measures: tuple[str, ...]
    keys: tuple[tuple[str, ...], ...]
    answers: dict[tuple[object, ...], Any]
    #: both versions' rows, when the engine read them up front (:func:`.audit_facts.hold_rows`)
    held: HeldRows | None = None


class SqlEngine(Engine):
    """The Engine interface over a :class:`~.dialect.Dialect` and a connection (see the module
    docstring for the hooks a concrete engine supplies)."""

    dialect: Dialect = Dialect()
    #: retries of write-write conflicts within a task
    conflict_retries: int = 5
    schema: str
    #: partitions a stream of rows selects a query (None: all in one); an engine whose driver
    #: holds each query's whole result (Spark) streams a few at a time
    stream_periods: int | None = None
    #: whether an audit's questions about a model are answered up front in one query over
    #: every area (an engine whose every query has a high fixed cost: Spark); else one by one
    audit_in_one_query: bool = False
    #: with ``audit_in_one_query``: the most rows (of both versions, as the engine's metadata
    #: tells them: :meth:`_rows_at_most`) that an audit reads whole in one query instead of
    #: aggregating them (an aggregate costs a shuffle: more than the rows, when they are few)
    held_rows: int = 0
    #: (project, model) -> the published (schema, name) of a model; None: (schema, model)
    naming: Callable[[Project | None, str], Rel] | None = None

    def __init__(self) -> None:
        self._scopes = threading.local()
        self._tmp_counter = 0
        self._tmp_lock = threading.Lock()
        #: one lock per table whose statistics this process refreshes (see _fresh_statistics)
        self._statistics_locks: dict[str, threading.Lock] = {}
        #: models with ``table_partitions``: their partitioned tables (capabilities permitting)
        self.partitioning = TablePartitions(self)

    # -- hooks: the connection -------------------------------------------------------------------
    #: the engine's connections (DuckDB: its file; Postgres: a pool); an engine without one
    #: (Spark: a session) overrides :meth:`connect`
    db: Database | None = None

    def connect(self) -> contextlib.AbstractContextManager[Any]:
        """A cursor-like connection: ``execute(sql)`` returns an object with ``fetchall``."""
        if self.db is None:
            raise NotImplementedError(f"{type(self).__name__} has no db: override connect()")
        return self.db.connection()

    def close(self) -> None:
        if self.db is not None:
            self.db.close()

    def interrupt(self) -> None:
        if self.db is not None:
            self.db.interrupt()

    def _columns(self, cur: Any, rel: Rel) -> list[Column] | None:
        """The columns of ``rel`` in table order; None when there is no such relation."""
        raise NotImplementedError

    def _kind(self, cur: Any, rel: Rel) -> str | None:
        """``"table"``, ``"view"`` or None (a catalog lookup: safe inside a transaction)."""
        raise NotImplementedError

    def _table_partitions(self, cur: Any, rel: Rel, column: Column) -> Found | None:
        """The partitions of ``rel`` by their bounds, when it is partitioned by range of
        ``column`` alone; None otherwise (an engine with ``capabilities.table_partitions``
        reads its catalog)."""
        return None

    def _tables_of(self, cur: Any, schema: str) -> list[str]:
        """The tables of ``schema`` holding rows of their own (a partition counts under its
        partitioned table)."""
        rows = self._rows(
            cur,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            f"{self.dialect.string(schema)} AND table_type = 'BASE TABLE'",
        )
        return [str(r[0]) for r in rows]

    def _transaction(self, cur: Any) -> contextlib.AbstractContextManager[Any]:
        """``BEGIN TRANSACTION`` ... ``COMMIT`` on ``cur``; ``ROLLBACK`` when the block raises
        (then re-raises). An engine whose driver manages transactions (savepoints when nested:
        Postgres) or that has none (Spark) overrides this."""
        return _begin_commit(cur, self._warehouse_errors())

    def _arrow(self, sql: str) -> contextlib.AbstractContextManager[Any]:
        """The result of ``sql`` as an Arrow stream, valid until the block ends."""
        raise NotImplementedError

    def _warehouse_errors(self) -> tuple[type[Exception], ...]:
        """The exception classes the warehouse's driver raises: a task's write classifies these
        (:meth:`_failure`) and lets everything else (a bug) go on as it is."""
        return ()

    def _classified(self, where: str, exc: Exception) -> tuple[TaskFailure, bool] | None:
        """:meth:`_failure` of ``exc``, except that a bug goes on as it is, even one the driver
        raises (pyspark's own PySparkTypeError, a wrong call from Python, is a TypeError)."""
        return None if isinstance(exc, PROGRAMMING_ERRORS) else self._failure(where, exc)

    def _failure(self, where: str, exc: Exception) -> tuple[TaskFailure, bool] | None:
        """The TaskFailure of a warehouse error in a task of ``where``, and whether it is a
        write conflict worth retrying inside the task; None: not the warehouse's error (a bug
        goes on as it is). Never asked about a programming error (PROGRAMMING_ERRORS)."""
        return None

    # -- hooks: statements whose shape differs ---------------------------------------------------
    def _rows(self, cur: Any, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in cur.execute(sql).fetchall()]

    def _count(self, cur: Any, sql: str) -> int:
        """Runs a DELETE, UPDATE or INSERT and returns the rows it changed (the DB-API's
        ``rowcount``)."""
        return int(cur.execute(sql).rowcount)

    def _ensure_schema(self, cur: Any, schema: str) -> None:
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {self.dialect.quote(schema)}")

    def _lock(self, cur: Any, rel: Rel, key: str = "") -> None:
        """A lock on ``rel`` (or one period of it, ``key``) until the transaction ends; engines
        whose transactions conflict optimistically need none."""

    def _tmp(self, suffix: str = "") -> str:
        with self._tmp_lock:
            self._tmp_counter += 1
            return f"__backfill_new_{self._tmp_counter}{suffix}"

    def _stage(self, cur: Any, sql: str) -> tuple[str, list[Column]]:
        """A temporary table holding the rows of ``sql`` inside the transaction: (its quoted
        name, its columns)."""
        raise NotImplementedError

    def _unstage(self, cur: Any, staged: str) -> None:
        """Drops what :meth:`_stage` or :meth:`_stage_rows` made (when the commit does not)."""

    def _stage_rows(self, cur: Any, rows: Any) -> str:
        """A relation (quoted) holding the Arrow table ``rows`` inside the transaction."""
        raise NotImplementedError

    def _replace_table(self, cur: Any, rel: Rel, source: str, columns: Sequence[Column]) -> int:
        """Replaces the table ``rel`` with the rows of ``source`` (any columns); returns the rows
        removed. Same columns and types: DELETE + INSERT, so readers keep seeing the old rows
        until commit; otherwise the table is dropped and re-created."""
        d = self.dialect
        target = d.qualified(rel)
        old = self._columns(cur, rel)
        kind = self._kind(cur, rel)
        same = sorted((c.name, c.type) for c in columns) == sorted(
            (c.name, c.type) for c in old or []
        )
        if kind == "table" and same:
            removed = self._count(cur, f"DELETE FROM {target}")
            cur.execute(d.insert(target, source, [c.name for c in columns]))
            return removed
        removed = self._one(cur, f"SELECT count(*) FROM {target}") if old is not None else 0
        if kind is not None:
            cur.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {target}")
        cur.execute(f"CREATE TABLE {target} AS SELECT * FROM {source}")
        return removed

    def _merge(
        self, cur: Any, target: str, source: str, columns: Sequence[str], keys: Sequence[str]
    ) -> int:
        """Upserts ``source`` into ``target`` on ``keys``; returns the rows replaced."""
        if self.dialect.merge_into:
            return self._merge_into(cur, target, source, columns, keys)
        q = self.dialect.quote
        cols = ", ".join(q(k) for k in keys)
        match = f"({cols}) IN (SELECT ({cols}) FROM {source})"
        deleted = self._count(cur, f"DELETE FROM {target} WHERE {match}")
        cur.execute(self.dialect.insert(target, source, columns))
        return deleted

    def _merge_into(
        self, cur: Any, target: str, source: str, columns: Sequence[str], keys: Sequence[str]
    ) -> int:
        """:meth:`_merge` as one ``MERGE INTO`` (the rows replaced are counted first)."""
        q = self.dialect.quote
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in keys)
        matched = self._one(
            cur,
            f"SELECT count(*) FROM {target} t WHERE EXISTS (SELECT 1 FROM {source} s WHERE {on})",
        )
        sets = ", ".join(f"{q(c)} = s.{q(c)}" for c in columns if c not in keys)
        cols = ", ".join(q(c) for c in columns)
        values = ", ".join(f"s.{q(c)}" for c in columns)
        update = f"UPDATE SET {sets}" if sets else "DO NOTHING"
        cur.execute(
            f"MERGE INTO {target} t USING {source} s ON {on} WHEN MATCHED THEN {update} "
            f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({values})"
        )
        return matched

    def _replace_view(self, cur: Any, rel: Rel, sql: str) -> None:
        target = self.dialect.qualified(rel)
        if self._kind(cur, rel) == "table":  # the model was a table, is now a view
            cur.execute(f"DROP TABLE {target}")
        cur.execute(f"CREATE OR REPLACE VIEW {target} AS {sql}")

    def _estimated_rows(self, cur: Any, select: str) -> float | None:
        """The rows the warehouse's planner expects ``select`` to return, found without running
        it; None: the engine cannot tell (then statistics are refreshed after every write, for
        a dialect that has :meth:`~.dialect.Dialect.analyze`)."""
        return None

    def _lock_publish(self, cur: Any, rels: Sequence[Rel]) -> None:
        """Locks out other publishes and writers of ``rels`` until the publish commits."""

    def _insert_rows(self, cur: Any, table: str, names: Sequence[str], rows: Sequence[Any]) -> None:
        """Inserts ``rows`` (values in the order of ``names``) into ``table`` as parameters of
        one statement (the DB-API's ``executemany``, the dialect's parameter marker)."""
        d = self.dialect
        marks = ", ".join(d.parameter for _ in names)
        listed = ", ".join(d.quote(n) for n in names)
        with self._cursor(cur) as c:
            c.executemany(
                f"INSERT INTO {table} ({listed}) VALUES ({marks})", [tuple(r) for r in rows]
            )

    def _cursor(self, cur: Any) -> contextlib.AbstractContextManager[Any]:
        """A DB-API cursor of ``cur``'s transaction (``cur`` itself, unless its driver lends
        connections whose cursors are separate objects: Postgres)."""
        return contextlib.nullcontext(cur)

    def _label(self, what: str) -> None:
        """Names this thread's next queries ``what`` where the warehouse shows its work (Spark:
        the jobs' description in its UI); default: nothing."""

    # -- naming ----------------------------------------------------------------------------------
    def published(self, project: Project | None, model: str) -> Rel:
        """The published (schema, name) of ``model``."""
        if self.naming is not None:
            return self.naming(project, model)
        return (self.schema, model)

    def location(self, project: Project | None, model: str, area: Area) -> Rel:
        """The (schema, name) ``model`` is written to in ``area``."""
        if area.direct:
            return self.published(project, model)
        return (audit_schema(str(area.backfill_id)), model)

    def relation(self, model: str, area: Area, project: Project | None = None) -> str:
        """The quoted relation ``model`` is written to in ``area``."""
        return self.dialect.qualified(self.location(project, model, area))

    # -- rendering -------------------------------------------------------------------------------
    def _ref(self, project: Project, area: Area, cur: Any, name: str) -> str:
        """What a read of ``name`` sees in ``area``: the backfill's new rows for its periods and
        the published rows elsewhere (the new table alone for full rebuilds)."""
        d = self.dialect
        pub = self.published(project, name)
        if area.direct or name not in area.periods:
            return d.qualified(pub)
        model = project.models[name]
        new = self.location(project, name, area)
        pub_cols = self._columns(cur, pub)
        new_cols = self._columns(cur, new)
        if model.strategy in ("full", "view") or not model.event_time:
            return d.qualified(new if new_cols is not None or pub_cols is None else pub)
        if pub_cols is None:
            return d.qualified(new)
        keep = d.in_periods(model.event_time, area.periods[name])
        outside = f"FROM {d.qualified(pub)} WHERE NOT coalesce({keep}, FALSE)"
        if new_cols is None:  # no new rows written yet
            return f"(SELECT * {outside})"
        return self._union(d.qualified(new), [c.name for c in new_cols], outside, pub_cols)

    def _union(self, new: str, new_cols: list[str], outside: str, pub_cols: list[Column]) -> str:
        """``new``'s rows and the published rows ``outside`` (a FROM ... WHERE ...) by name;
        a column only one side has is NULL on the other."""
        q = self.dialect.quote
        names = new_cols + [c.name for c in pub_cols if c.name not in new_cols]
        have_pub = {c.name for c in pub_cols}
        left = ", ".join(q(n) if n in new_cols else f"NULL AS {q(n)}" for n in names)
        right = ", ".join(q(n) if n in have_pub else f"NULL AS {q(n)}" for n in names)
        return f"(SELECT {left} FROM {new} UNION ALL SELECT {right} {outside})"

    def _source_of(self, schema: str, table: str) -> str:
        return self.dialect.qualified((schema, table))

    def _render(
        self,
        project: Project,
        model: str,
        window: tuple[dt.datetime | None, dt.datetime | None],
        area: Area,
        cur: Any,
    ) -> str:
        m = project_model(project, model)

        def ref(name: str, **_: object) -> str:
            if name not in project.models:
                raise NotFoundError(f"ref({name!r}) names no model")
            return self._ref(project, area, cur, name)

        def is_incremental() -> bool:
            return self._kind(cur, self.published(project, model)) is not None or (
                not area.direct and self._kind(cur, self.location(project, model, area)) is not None
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
            start=window[0],
            end=window[1],
            ref=ref,
            source=self._source_of,
            this=this,
            is_incremental=is_incremental,
            where=model_location(project, model),
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
            return self._render(project, model, (start, end), area, cur)

    # -- writing ---------------------------------------------------------------------------------
    def run_task(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> WriteResult:
        return self._run(project, model, (start, end), area, None, None)

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
        return self._run(project, model, (start, end), area, rows, dead_letters)

    def _run(
        self,
        project: Project,
        model: str,
        window: tuple[dt.datetime | None, dt.datetime | None],
        area: Area,
        rows: Any,
        dead_letters: DeadLetters | None,
    ) -> WriteResult:
        m = project_model(project, model)
        where = model_location(project, model)
        began = time.perf_counter()
        conflicts = 0
        delay = 0.005
        while True:
            try:
                with self.connect() as cur:
                    written, deleted, fp, parts = self._write(
                        cur, project, m, window, area, rows, dead_letters
                    )
                    if m.strategy != "view":
                        rel = self.location(project, model, area)
                        held = self._written_filter(project, m, window)
                        split = self._written_partitions(cur, project, m, rel, window)
                        self._fresh_statistics(cur, rel, held, fp.rows, split)
                return WriteResult(
                    written,
                    deleted,
                    fp,
                    time.perf_counter() - began,
                    conflicts,
                    parts or None,
                    self._write_version(),
                )
            except self._warehouse_errors() as exc:
                found = self._classified(where, exc)
                if found is None:
                    raise
                failure, conflict = found
                if not conflict:
                    raise failure from None
                if conflicts >= self.conflict_retries:
                    raise TaskFailure(
                        f"{where}: gave up after {conflicts + 1} write conflicts: {exc}",
                        transient=True,
                    ) from None
                conflicts += 1
                log.debug("%s: write conflict, retrying: %s", model, exc)
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    # -- planner statistics --------------------------------------------------------------------
    #: the factor by which the planner may underestimate the rows a write left in a table
    #: before the table's statistics are refreshed
    stale_statistics: float = 4.0

    def _written_filter(
        self, project: Project, m: Model, window: tuple[dt.datetime | None, dt.datetime | None]
    ) -> str:
        """The filter of the rows a task of ``m`` over ``window`` wrote: its period, or the
        whole table (full rebuilds, models without an event time)."""
        start, end = window
        if start is None or end is None or not m.event_time:
            return "TRUE"
        if not writes_period(project, m, window):
            return "TRUE"
        return self.dialect.in_periods(m.event_time, [(start, end)])

    def _written_partitions(
        self,
        cur: Any,
        project: Project,
        m: Model,
        rel: Rel,
        window: tuple[dt.datetime | None, dt.datetime | None],
    ) -> list[Rel] | None:
        """The partitions of ``m``'s partitioned table ``rel`` a task over ``window`` wrote
        (None: not a partitioned table, or not a period task)."""
        start, end = window
        if start is None or end is None or not writes_period(project, m, window):
            return None
        if not self.partitioning.wanted(m, model_location(project, m.name)):
            return None
        return self._partitions_for(cur, project, m, rel, (start, end), own=True)

    def _partitions_for(
        self,
        cur: Any,
        project: Project,
        m: Model,
        rel: Rel,
        period: Period,
        *,
        own: bool,
    ) -> list[Rel] | None:
        """:meth:`TablePartitions.ensure` for a task of ``m``: a layout the column cannot hold
        fails the task for good."""
        try:
            return self.partitioning.ensure(cur, m, rel, [period], own=own)
        except InvalidInputError as exc:
            where = model_location(project, m.name)
            raise TaskFailure(f"{where}: {exc}", transient=False) from None

    def _fresh_statistics(
        self, cur: Any, rel: Rel, held: str, rows: int, parts: Sequence[Rel] | None = None
    ) -> None:
        """Makes the planner see the ``rows`` rows that match ``held`` (a filter) in the table
        ``rel`` now, before any task reads them: a write committed, and its task is reported
        done (so a later task can be claimed) only after this returns. Of a partitioned table
        the partitions written (``parts``) are analyzed, each with statistics of its own: an
        ANALYZE of the partitioned table would sample every partition again.

        A backfill writes what leaves a planner's statistics stale: whole new periods, past the
        last histogram bound, in bulk. Postgres then estimates 1 row for the period, joins the
        next model's inputs by a nested loop of sequential scans (minutes instead of a second),
        and autovacuum analyzes too late for the next task, or never between two tasks. So the
        planner is asked what it expects of the written rows (a plan, nothing runs) and the
        table is analyzed when it expects fewer than ``rows / stale_statistics``: a task that
        rewrites a period its statistics already describe (most backfills of old periods)
        costs one plan, not a sample of the table.

        After the commit, not inside the task's transaction (where ANALYZE would see the task's
        own rows too): ANALYZE holds a lock that excludes other ANALYZEs of the table until
        its transaction ends, and would make the task's concurrent siblings wait for each
        other's fingerprints and commits. It waits for a concurrent ANALYZE instead of
        skipping: one that began before this commit does not see these rows. The tasks of one
        process take turns per table for the plan and the ANALYZE, so a task that waited asks
        the planner again: an ANALYZE of a sibling that began after this commit counted these
        rows too (concurrent tasks of one model commit close together: at 4,000 orders a day
        the shop's build analyzed each clean table 11 times, each reading most of its pages).

        Statistics are an optimisation: a failure to refresh them is logged, and the task,
        committed already, stays done."""
        d = self.dialect
        target = d.qualified(rel)
        analyze = d.analyze(target)
        if analyze is None or rows <= 0:
            return
        try:
            with self._statistics_turn(target, bool(parts)):
                expected = self._estimated_rows(cur, f"SELECT * FROM {target} WHERE {held}")
                if expected is not None and rows <= self.stale_statistics * max(expected, 1.0):
                    return
                if not parts:
                    cur.execute(analyze)
                for part in parts or ():
                    cur.execute(d.analyze(d.qualified(part)))
        except self._warehouse_errors() as exc:
            log.warning(
                "statistics of %s not refreshed (tasks reading it may be planned for fewer "
                "rows than it has): %s",
                target,
                exc,
            )

    def _statistics_turn(self, target: str, parts: bool) -> contextlib.AbstractContextManager[Any]:
        """This process's turn to refresh the statistics of the table ``target``; none for the
        partitions of a partitioned table (each task analyzes its own: they never coincide)."""
        if parts:
            return contextlib.nullcontext()
        with self._tmp_lock:
            return self._statistics_locks.setdefault(target, threading.Lock())

    def _bind(self, cur: Any, sql: str) -> list[str] | None:
        """The columns of the SELECT ``sql`` found without running it (and without aborting
        the transaction when it fails to bind); None: the engine cannot, stage it instead."""
        return None

    def _write_replace(
        self,
        cur: Any,
        project: Project,
        m: Model,
        rel: Rel,
        sql: str,
        window: tuple[dt.datetime, dt.datetime],
    ) -> Written | None:
        """One ``replace`` period written straight from the model's SELECT, inside the
        transaction, when the engine can bind a SELECT without running it: a task's fixed
        cost is mostly per statement, so no temporary table, its copy and its counts.

            DELETE the period; INSERT the SELECT        -> rows deleted, rows written
            fingerprint the period                      -> per calendar partition (the audit
                                                           takes them instead of scanning)

        The SELECT's rows outside the period (or with a NULL event time) are the rows written
        minus the rows now in the period (the DELETE emptied it). None: the general path."""
        new = self._bind(cur, sql)
        if new is None or not m.event_time:
            return None
        d = self.dialect
        where, target = model_location(project, m.name), d.qualified(rel)
        source = f"(\n{sql}\n) q"  # newlines: a trailing -- comment stays closed
        # Two runs of one task at once (a worker that lost its lease and the one that took it
        # over) would both delete nothing and both insert: they take turns.
        self._lock(cur, rel, f"{window[0]}/{window[1]}")
        if self._kind(cur, rel) is None:
            # The first tasks of a model race to create its table: one creates it, the others
            # wait here and find it when it commits (a catalog query, as _kind's, sees it).
            self._lock(cur, rel)
            if self._kind(cur, rel) is None:
                cur.execute(f"CREATE TABLE {target} AS SELECT * FROM {source} LIMIT 0")
        cols = self._columns(cur, rel) or []
        old = [c.name for c in cols]
        if set(new) != set(old):
            raise schema_changed(where, rel[0], new, old)
        in_period = d.in_periods(m.event_time, [window])
        deleted = self._count(cur, f"DELETE FROM {target} WHERE {in_period}")
        parts = task_parts(m, *window)
        covered = bool(parts) and _tiles(parts, window)
        by_part: Mapping[str, PartitionFingerprint] = {}
        insert = d.insert(target, source, new)
        kind = _kind_in(cols, m.event_time)
        fused = (
            d.insert_fingerprinted(target, source, new, cols, m.event_time, kind, parts)
            if covered
            else None
        )
        if fused is not None:  # written and fingerprinted in one statement
            got = self._rows(cur, fused)
            written = sum(int(str(n)) for _, n, _ in got)
            by_part = parts_found(got, parts)
            fp = PartitionFingerprint.total(by_part.values())
        elif not (written := self._count(cur, insert)):
            # the period is empty (deleted above, in this transaction): no scan
            fp = PartitionFingerprint.empty()
            by_part = dict.fromkeys([p[0] for p in parts], fp) if covered else {}
        elif covered:
            by_part = self._fingerprint_parts(cur, target, cols, m.event_time, parts)
            fp = PartitionFingerprint.total(by_part.values())
        else:
            fp = self._fingerprint_where(cur, target, cols, in_period)
        if written - fp.rows:
            raise outside_failure(where, m, written - fp.rows, *window)
        return written, deleted, fp, by_part

    def _write(
        self,
        cur: Any,
        project: Project,
        m: Model,
        window: tuple[dt.datetime | None, dt.datetime | None],
        area: Area,
        rows: Any,
        dead_letters: DeadLetters | None,
    ) -> Written:
        """Writes the task's period: the model's rendered SELECT, or ``rows`` (Arrow) landed."""
        start, end = window
        rel = self.location(project, m.name, area)
        partitioned = writes_period(project, m, window)
        self._ensure_schema(cur, rel[0])
        split = partitioned and self.partitioning.wanted(m, model_location(project, m.name))
        made = None
        if split:  # its partitions before the write, each in a transaction of its own
            assert start is not None and end is not None
            made = self._partitions_for(cur, project, m, rel, (start, end), own=True)
        with self._transaction(cur):
            if rows is None:
                sql = self._render(project, m.name, window, area, cur)
                if (
                    partitioned
                    and m.strategy == "replace"
                    and m.event_time
                    and not dead_letters
                    and not split
                ):
                    assert start is not None and end is not None
                    fast = self._write_replace(cur, project, m, rel, sql, (start, end))
                    if fast is not None:
                        return fast
                landed = None
            else:
                landed = sql = self._stage_rows(cur, rows)
                sql = f"SELECT * FROM {landed}"
            if m.strategy == "view":
                self._lock(cur, rel)
                self._replace_view(cur, rel, sql)
                fp = self._fingerprint_where(cur, self.relation(m.name, area, project), rel)
                return fp.rows, 0, fp, {}
            written, deleted, fp = self._write_table(
                cur,
                project,
                m,
                rel,
                sql,
                window if partitioned else None,
                split=split and made is None,
            )
            if landed is not None:
                self._unstage(cur, landed)
            if dead_letters is not None and start is not None and end is not None:
                self._dead_letters(cur, project, dead_letters, (start, end))
        return written, deleted, fp, {}

    def _write_table(
        self,
        cur: Any,
        project: Project,
        m: Model,
        rel: Rel,
        sql: str,
        window: tuple[dt.datetime | None, dt.datetime | None] | None,
        *,
        split: bool = False,
    ) -> tuple[int, int, PartitionFingerprint]:
        """The general write of a task into the table ``rel``: staged, checked, swapped in.
        ``split``: a partitioned model whose partitions were not made before the transaction
        (its table was missing): made here, the table too."""
        d = self.dialect
        target = d.qualified(rel)
        where = model_location(project, m.name)
        tmp, new_cols = self._stage(cur, sql)
        names = [c.name for c in new_cols]
        in_period = ""
        if window is not None:
            start, end = window
            assert start is not None and end is not None and m.event_time
            in_period = d.in_periods(m.event_time, [(start, end)])
            outside = self._one(
                cur, f"SELECT count(*) FROM {tmp} WHERE NOT coalesce({in_period}, FALSE)"
            )
            if outside:
                raise outside_failure(where, m, outside, start, end)
        new_rows = self._one(cur, f"SELECT count(*) FROM {tmp}")
        if window is None or m.strategy == "full":
            self._lock(cur, rel)
            deleted = self._replace_table(cur, rel, tmp, new_cols)
        else:
            # Two runs of one task at once (a worker that lost its lease and the one that took
            # it over) would both delete nothing and both insert: they take turns.
            self._lock(cur, rel, f"{window[0]}/{window[1]}")
            if self._kind(cur, rel) is None:
                # The first tasks of a model race to create its table: one creates it, the
                # others wait here and find it when it commits.
                self._lock(cur, rel)
                if self._kind(cur, rel) is None and split:
                    try:
                        self.partitioning.create_table(cur, m, rel, tmp, new_cols)
                    except InvalidInputError as exc:
                        raise TaskFailure(f"{where}: {exc}", transient=False) from None
                elif self._kind(cur, rel) is None:
                    cur.execute(f"CREATE TABLE {target} AS SELECT * FROM {tmp} LIMIT 0")
            if split:
                assert window[0] is not None and window[1] is not None
                self._partitions_for(cur, project, m, rel, (window[0], window[1]), own=False)
            old = [c.name for c in self._columns(cur, rel) or []]
            if set(names) != set(old):
                raise schema_changed(where, rel[0], names, old)
            if m.strategy == "merge" and m.unique_key:
                self._lock(cur, rel)  # keys may cross periods: one at a time
                deleted = self._merge(cur, target, tmp, names, m.unique_key)
            else:
                deleted = 0
                if m.strategy == "replace":
                    deleted = self._count(cur, f"DELETE FROM {target} WHERE {in_period}")
                # append deletes nothing: running it twice doubles the period (the planner
                # refuses append models unless allow_append).
                cur.execute(d.insert(target, tmp, names))
        fp = self._fingerprint_where(cur, target, rel, in_period or "TRUE")
        self._unstage(cur, tmp)
        return new_rows, max(deleted, 0), fp

    def _dead_letters(
        self, cur: Any, project: Project, dl: DeadLetters, window: tuple[dt.datetime, dt.datetime]
    ) -> None:
        """Replaces the period's dead letters of the topic (see :meth:`Engine.land`)."""
        d = self.dialect
        rel = self.published(project, dl.table)
        target = d.qualified(rel)
        staged = self._stage_rows(cur, dl.rows)
        self._ensure_schema(cur, rel[0])
        if self._kind(cur, rel) is None:
            cur.execute(
                f"CREATE TABLE {target} {d.table_options} AS SELECT * FROM {staged} LIMIT 0"
            )
        cur.execute(
            f"DELETE FROM {target} WHERE {d.quote('topic')} = {d.string(dl.topic)} AND "
            f"{d.in_periods('record_timestamp', [window])}"
        )
        names = [c.name for c in self._columns(cur, rel) or []]
        cur.execute(d.insert(target, staged, names))
        self._unstage(cur, staged)

    def drop_area(self, backfill_id: str) -> None:
        with self.connect() as cur:
            cur.execute(
                f"DROP SCHEMA IF EXISTS {self.dialect.quote(audit_schema(backfill_id))} CASCADE"
            )

    # -- inspecting ------------------------------------------------------------------------------
    def _one(self, cur: Any, sql: str) -> int:
        rows = self._rows(cur, sql)
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def _source(
        self, cur: Any, project: Project, model: str, area: Area, preview: bool
    ) -> tuple[str, list[Column]] | None:
        """The relation (or query) holding ``model``'s rows in ``area`` and its columns; None
        when missing."""
        d = self.dialect
        rel = self.location(project, model, area)
        cols = self._columns(cur, rel)
        if cols is None:
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
            return d.qualified(rel), cols
        pub = self.published(project, model)
        pub_cols = {c.name for c in self._columns(cur, pub) or []}
        names = [c.name for c in cols]
        if not pub_cols or not set(names) <= pub_cols:
            return d.qualified(rel), cols
        # What publish leaves: a merge upserts on the key, so published rows of the periods
        # whose key the new run did not produce stay.
        listed = ", ".join(d.quote(n) for n in names)
        match = " AND ".join(f"n.{d.quote(k)} = p.{d.quote(k)}" for k in m.unique_key)
        return (
            f"(SELECT {listed} FROM {d.qualified(rel)} UNION ALL SELECT {listed} FROM "
            f"{d.qualified(pub)} p WHERE {d.in_periods(m.event_time, periods, alias='p')} AND NOT "
            f"EXISTS (SELECT 1 FROM {d.qualified(rel)} n WHERE {match}))"
        ), cols

    def _missing(self, project: Project, model: str, area: Area) -> NotFoundError:
        where = "the published schema" if area.direct else "the area"
        return NotFoundError(
            f"{model} has no table in {where} {self.relation(model, area, project)}"
        )

    def _where_periods(
        self, project: Project, model: str, periods: Sequence[Period] | None, cols: Sequence[Column]
    ) -> str:
        if periods is None:
            return "TRUE"
        m = project_model(project, model)
        if not m.event_time:
            raise InvalidInputError(f"model {model!r} has no event_time to select periods by")
        return self.dialect.in_periods(m.event_time, periods, _kind_in(cols, m.event_time), "t")

    def columns(self, project: Project, model: str, area: Area) -> list[Column] | None:
        with self.connect() as cur:
            found = self._source(cur, project, model, area, False)
        return None if found is None else found[1]

    def _fingerprint_where(
        self, cur: Any, source: str, columns: Sequence[Column] | Rel, where: str = "TRUE"
    ) -> PartitionFingerprint:
        """:func:`fingerprint_where` on ``cur``; ``columns``: those of ``source``, or the
        relation to read them from (the row hash may depend on their types)."""
        if isinstance(columns, tuple):
            columns = self._columns(cur, columns) or []
        return fingerprint_where(self.dialect, self._reader(cur), source, columns, where)

    def _fingerprint_parts(
        self,
        cur: Any,
        source: str,
        cols: Sequence[Column],
        event_time: str | None,
        parts: Sequence[Part],
    ) -> dict[str, PartitionFingerprint]:
        kind = _kind_in(cols, event_time or "")
        return fingerprint_parts(
            self.dialect, self._reader(cur), source, cols, (event_time, kind), parts
        )

    def _reader(self, cur: Any) -> Callable[[str], list[tuple[Any, ...]]]:
        return lambda sql: self._rows(cur, sql)

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
            found = self._source(cur, project, model, area, preview)
            if found is None:
                return {
                    label: PartitionFingerprint.empty()
                    for label in ([p[0] for p in parts] or [WHOLE])
                }
            rel, cols = found
            known = self._answer("fp", rel, tuple(parts))
            if known is not None:
                return dict(known)
            scope = self.scope(model)
            if scope is not None and parts and tuple(parts) == scope.parts:
                return self._scoped_fingerprints(cur, scope, rel, cols, m)
            return self._fingerprint_parts(cur, rel, cols, m.event_time, parts)

    def _scoped_fingerprints(
        self, cur: Any, scope: AuditScope, rel: str, cols: list[Column], m: Model
    ) -> dict[str, PartitionFingerprint]:
        """Fingerprints of the scope's partitions, answering more of its questions from the
        same scan where the engine can (DuckDB: the exact measures' sums)."""
        return self._fingerprint_parts(cur, rel, cols, m.event_time, scope.parts)

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
        with self.connect() as cur:
            found = self._source(cur, project, model, area, preview)
            if found is None:
                return dict.fromkeys(measures)
            rel, cols = found
            where = self._where_periods(project, model, periods, cols)
            known = [self._answer("sum", rel, where, c) for c in measures]
            if all(k is not None for k in known):
                return {c: k[0] for c, k in zip(measures, known, strict=True)}
            q = self.dialect.quote
            sums = ", ".join(f"sum(t.{q(c)})" for c in measures)
            row = self._rows(cur, f"SELECT {sums} FROM {rel} t WHERE {where}")[0]
        kinds = {c.name: c.kind for c in cols}
        return {c: self.dialect.sum_value(row[i], kinds.get(c)) for i, c in enumerate(measures)}

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
        d = self.dialect
        with self.connect() as cur:
            found = self._source(cur, project, model, area, preview)
            if found is None:
                return True
            rel, cols = found
            where = self._where_periods(project, model, periods, cols)
            known = self._answer("unique", rel, where, tuple(columns))
            if known is not None:
                return bool(known)
            listed = [f"t.{d.quote(c)}" for c in columns]
            nonnull = " AND ".join(f"{c} IS NOT NULL" for c in listed)
            n, distinct, full = self._rows(
                cur,
                f"SELECT count(*), {d.count_distinct(listed)}, {d.count_if(nonnull)} "
                f"FROM {rel} t WHERE {where}",
            )[0]
        return int(str(n)) == int(str(distinct)) == int(str(full))

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
        self._label(f"backfill: rows of {model}")
        m = project_model(project, model)
        if utc_column and not m.event_time:
            raise InvalidInputError(f"model {model!r} has no event_time")
        with self.connect() as cur:  # the catalog only; the rows travel as Arrow
            found = self._source(cur, project, model, area, preview)
        if found is None:
            raise self._missing(project, model, area)
        rel, cols = found
        select = self._select_list(cols)
        if utc_column and m.event_time:
            instant = self.dialect.as_instant(f"t.{self.dialect.quote(m.event_time)}")
            select += f", {instant} AS {self.dialect.quote(utc_column)}"
        step = self.stream_periods
        if step is None or periods is None:
            wheres = [self._where_periods(project, model, periods, cols) if periods != [] else ""]
        else:
            wheres = [
                self._where_periods(project, model, periods[i : i + step], cols)
                for i in range(0, len(periods), step)
            ]
        with self._arrow_chunks(f"SELECT {select} FROM {rel} t", wheres) as rows:
            yield rows

    @contextlib.contextmanager
    def stream_pair(
        self,
        project: Project,
        model: str,
        area: Area,
        periods: Sequence[Period],
        *,
        utc_column: str | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """With ``audit_in_one_query`` (every query has a high fixed cost), both versions in ONE
        query when they have the same columns and the periods make one chunk
        (``stream_periods``) a side anyway: the rows tagged with their side, split apart on
        arrival. Else a stream each."""
        held = self._held_pair(project, model, area, periods, utc_column)
        if held is not None:
            yield held
            return
        m = project_model(project, model)
        one = (
            self.audit_in_one_query
            and m.event_time is not None
            and (self.stream_periods is None or len(periods) <= self.stream_periods)
        )
        old = new = None
        if one:
            with self.connect() as cur:  # the catalog only
                old = self._source(cur, project, model, PUBLISHED, False)
                new = self._source(cur, project, model, area, True)
        if old is None or new is None or not _same_types(old[1], new[1]):
            with super().stream_pair(project, model, area, periods, utc_column=utc_column) as pair:
                yield pair
            return
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        self._label(f"backfill: rows of {model}, published and new")
        d = self.dialect
        cols = old[1]  # the new side's columns in this order too (selected by name)
        select = self._select_list(cols)
        if utc_column and m.event_time:
            instant = d.as_instant(f"t.{d.quote(m.event_time)}")
            select += f", {instant} AS {d.quote(utc_column)}"
        where = self._where_periods(project, model, periods, cols)
        side = d.quote("__backfill_side")
        sql = " UNION ALL ".join(
            f"SELECT {i} AS {side}, {select} FROM {rel} t WHERE {where}"
            for i, (rel, _) in enumerate((old, new))
        )
        with self._arrow(sql) as rows:
            table = pa.table(rows)
        tag = table.column(0)
        table = table.drop_columns([table.column_names[0]])

        def reader(i: int) -> Any:
            part = table.filter(pc.equal(tag, i))
            return pa.RecordBatchReader.from_batches(part.schema, part.to_batches())

        yield reader(0), reader(1)

    def _held_pair(
        self,
        project: Project,
        model: str,
        area: Area,
        periods: Sequence[Period],
        utc_column: str | None,
    ) -> tuple[Any, Any] | None:
        """The pair :meth:`stream_pair` asks for with the published rows the open audit scope
        holds, and the area's from the scope too or else in one query of these periods (the
        audit groups the periods it asks for by rows); None when the scope holds none of
        these or the streams need a column the held rows lack."""
        scope = self.scope(model)
        held = None if scope is None or utc_column else scope.held
        if scope is None or held is None:
            return None
        index = {(s, e): i for i, (_, s, e) in enumerate(scope.parts)}
        if any((s, e) not in index for s, e in periods):
            return None
        at = [index[(s, e)] for s, e in periods]
        with self.connect() as cur:  # the catalog only
            old = self._source(cur, project, model, PUBLISHED, False)
            new = self._source(cur, project, model, area, True)
        if old is None or new is None or not _same_types(held.columns, new[1]):
            return None
        old_rows = held.rows(old[0], at)
        if old_rows is None:
            return None
        new_rows = held.rows(new[0], at)
        if new_rows is None:
            import pyarrow as pa

            self._label(f"backfill: rows of {model}, new")
            where = self._where_periods(project, model, periods, held.columns)
            with self._arrow(f"SELECT {held.select} FROM {new[0]} t WHERE {where}") as rows:
                table = pa.table(rows).cast(old_rows.schema)
            new_rows = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
        return old_rows, new_rows

    @contextlib.contextmanager
    def _arrow_chunks(self, select: str, wheres: Sequence[str]) -> Iterator[Any]:
        """The rows of ``select`` under each filter of ``wheres`` (empty: none), in order, as
        one Arrow stream: one query; with ``stream_periods``, a query a filter (a chunk of
        periods), so that the driver holds one chunk's rows, never the whole selection."""
        if self.stream_periods is None:
            with self._arrow(f"{select} WHERE {' OR '.join(wheres) or 'FALSE'}") as rows:
                yield rows
            return
        import pyarrow as pa

        schema = self._arrow_schema(select)

        def batches() -> Iterator[Any]:
            for where in wheres:
                with self._arrow(f"{select} WHERE {where}") as rows:
                    yield from pa.table(rows).cast(schema).to_batches()

        yield pa.RecordBatchReader.from_batches(schema, batches())

    def _arrow_schema(self, select: str) -> Any:
        """The Arrow schema of the rows of ``select``: every chunk of a stream is cast to it."""
        import pyarrow as pa

        with self._arrow(f"{select} LIMIT 0") as rows:
            return pa.table(rows).schema

    def _select_list(self, cols: Sequence[Column]) -> str:
        return ", ".join(self.dialect.stream_column(c, "t") for c in cols)

    @contextlib.contextmanager
    def table_rows(self, schema: str, table: str) -> Iterator[Any]:
        """Every row of the warehouse's table ``schema.table`` as an Arrow stream (``backfill
        diff schema.table``); InvalidInputError when there is no such table."""
        with self.connect() as cur:
            cols = self._columns(cur, (schema, table))
        if cols is None:
            raise InvalidInputError(
                f"{schema}.{table}: no such table in the warehouse ({self!r}); expected "
                "schema.table of a table or view there"
            )
        rel = self.dialect.qualified((schema, table))
        with self._arrow(f"SELECT {self._select_list(cols)} FROM {rel} t") as rows:
            yield rows

    # -- partitioned tables ----------------------------------------------------------------------
    def partition_table(self, project: Project, model: str) -> int:
        """Makes the published table of ``model`` (which has ``table_partitions``) a
        partitioned one, its rows copied (see :meth:`.partitions.TablePartitions.migrate`):
        a table that is not partitioned is otherwise left alone. Returns the partitions made
        (0: it is partitioned already)."""
        m = project_model(project, model)
        if m.table_partitions is None or not self.capabilities.table_partitions:
            raise InvalidInputError(
                f"model {model!r}: partition_table needs table_partitions on the model and an "
                f"engine with partitioned tables (postgres); this is {self.name}, "
                f"table_partitions {m.table_partitions!r}"
            )
        with self.connect() as cur:
            return self.partitioning.migrate(cur, m, self.published(project, model))

    def area_table(self, project: Project, model: str, area: Area) -> TableSource:
        """``model``'s relation in ``area`` (:meth:`location`), read in one snapshot
        (:meth:`_open_table`)."""
        project_model(project, model)
        schema, name = self.location(project, model, area)
        return self._open_table((schema, name), f"{model} ({self.name} {schema}.{name})")

    def published_table(self, project: Project | None, name: str, location: str) -> TableSource:
        """The published table of the model ``name`` (its relation after this engine's naming),
        else the table ``schema.table`` of the warehouse, read in one snapshot
        (:meth:`_open_table`)."""
        if project is not None and name in project.models:
            rel = self.published(project, name)
        elif "." in name and all(name.partition(".")[::2]):
            schema, _, table = name.partition(".")
            rel = (schema, table)
        else:
            where = f" of project {project.name!r}" if project is not None else ""
            raise InvalidInputError(
                f"{location}: expected a model{where} or schema.table of its warehouse"
            )
        return self._open_table(rel, location)

    def _open_table(self, rel: Rel, location: str) -> TableSource:
        """The warehouse's table ``rel`` as a :class:`TableSource` (each engine opens its own
        connection, one snapshot)."""
        raise InvalidInputError(
            f"{location}: the {self.name} engine cannot open its tables for diff_tables"
        )

    # -- the warehouse for writers that are not this engine (dbt) ------------------------------
    def task_failure(self, where: str, exc: Exception) -> TaskFailure | None:
        """The TaskFailure of ``exc`` when it is this warehouse's error; None otherwise."""
        found = self._classified(where, exc)
        return None if found is None else found[0]

    def seed(self, work: Rel, published: Rel, how: str) -> None:
        """Prepares ``work`` for another writer: ``"table"``, a copy of the published table
        (when there is one and ``work`` is missing); ``"view"``, a view on it; ``"schema"``,
        only ``work``'s schema."""
        d = self.dialect
        with self.connect() as cur:
            exists = self._kind(cur, published) is not None
            if how == "view" and (work == published or not exists):
                return
            self._ensure_schema(cur, work[0])
            if how == "table" and exists and self._kind(cur, work) is None:
                cur.execute(
                    f"CREATE TABLE {d.qualified(work)} AS SELECT * FROM {d.qualified(published)}"
                )
            elif how == "view":
                cur.execute(
                    f"CREATE OR REPLACE VIEW {d.qualified(work)} AS "
                    f"SELECT * FROM {d.qualified(published)}"
                )

    def copy_periods(
        self,
        target: Rel,
        source: Rel,
        event_time: str | None,
        periods: Sequence[Period] | None,
    ) -> list[tuple[int, PartitionFingerprint]]:
        """Replaces ``target``'s rows in each of ``periods`` (None: the whole table) with
        ``source``'s, in one transaction (``target == source``: another writer wrote it in
        place, nothing to copy); (rows replaced, fingerprint) per period, from one scan."""
        d = self.dialect
        t, src = d.qualified(target), d.qualified(source)
        parts = [(str(i), s, e) for i, (s, e) in enumerate(periods or [])]
        with self.connect() as cur:
            if target != source:
                self._ensure_schema(cur, target[0])
            with self._transaction(cur):
                deleted = [0] * max(len(parts), 1)
                names = [c.name for c in self._columns(cur, source) or []]
                if target != source and (not parts or not event_time):
                    self._replace_table(cur, target, src, self._columns(cur, source) or [])
                elif target != source:
                    assert event_time
                    where = d.in_periods(event_time, periods or [])
                    if self._kind(cur, target) is None:
                        cur.execute(f"CREATE TABLE {t} AS SELECT * FROM {src} LIMIT 0")
                    cols = self._columns(cur, target) or []
                    before = self._fingerprint_parts(cur, t, cols, event_time, parts)
                    deleted = [before[label].rows for label, _, _ in parts]
                    cur.execute(f"DELETE FROM {t} WHERE {where}")
                    cur.execute(f"{d.insert(t, src, names)} WHERE {where}")
                cols = self._columns(cur, target) or []
                fps = self._fingerprint_parts(cur, t, cols, event_time if parts else None, parts)
            if target != source:  # downstream tasks read the copy next
                held = d.in_periods(event_time, periods or []) if parts and event_time else "TRUE"
                self._fresh_statistics(cur, target, held, sum(fp.rows for fp in fps.values()))
        if not parts:
            return [(0, fps[WHOLE])]
        return [(deleted[i], fps[str(i)]) for i in range(len(parts))]

    def drop_schemas(self, names: Sequence[str], prefix: str) -> None:
        """Drops the schemas ``names`` and those starting with ``prefix``, with their tables."""
        d = self.dialect
        listed = ", ".join(d.string(n) for n in names)
        with self.connect() as cur:
            found = self._rows(
                cur,
                "SELECT schema_name FROM information_schema.schemata WHERE catalog_name = "
                f"current_database() AND (schema_name IN ({listed}) OR starts_with(schema_name, "
                f"{d.string(prefix)}))",
            )
            for (schema,) in found:
                cur.execute(f"DROP SCHEMA IF EXISTS {d.quote(str(schema))} CASCADE")

    # -- the audit scope -------------------------------------------------------------------------
    def scope(self, model: str) -> AuditScope | None:
        """The open audit scope of ``model`` in this thread, or None."""
        scope: AuditScope | None = getattr(self._scopes, "scope", None)
        return scope if scope is not None and scope.model == model else None

    def _answer(self, *question: object) -> Any:
        """The open scope's answer to ``question``, or None (ask the tables)."""
        scope: AuditScope | None = getattr(self._scopes, "scope", None)
        return None if scope is None else scope.answers.get(question)

    @contextlib.contextmanager
    def audit_scope(
        self,
        project: Project,
        model: str,
        areas: Sequence[Area],
        parts: Sequence[Part],
        measures: Sequence[str],
        keys: Sequence[Sequence[str]],
        *,
        diff_area: Area | None = None,
    ) -> Iterator[None]:
        scope = AuditScope(model, tuple(parts), tuple(measures), tuple(tuple(k) for k in keys), {})
        self._scopes.scope = scope if parts else None
        try:
            if parts:
                self._answer_up_front(project, scope, areas, diff_area)
            yield
        finally:
            self._scopes.scope = None

    def _answer_up_front(
        self, project: Project, scope: AuditScope, areas: Sequence[Area], diff_area: Area | None
    ) -> None:
        """Answers the scope's questions before they are asked: with ``audit_in_one_query``,
        one query for every question of every area (:mod:`.audit_facts`); else as they come.
        When the areas hold at most ``held_rows`` rows, that query reads their rows instead,
        which the diff's streams of ``diff_area`` then take (:meth:`stream_pair`): with
        ``diff_area``'s rows too when the audit did not ask about it (its fingerprints are the
        run's), so the diff of the differing partitions needs no query of its own."""
        if not self.audit_in_one_query:
            return
        with self.connect() as cur:
            if diff_area is not None and self._hold(cur, project, scope, areas, diff_area):
                return
            sides = [self._source(cur, project, scope.model, a, False) for a in areas]
            answer_up_front(
                self.dialect,
                self._reader(cur),
                project_model(project, scope.model).event_time,
                scope,
                [s for s in sides if s],
            )

    def _hold(
        self,
        cur: Any,
        project: Project,
        scope: AuditScope,
        areas: Sequence[Area],
        diff_area: Area,
    ) -> bool:
        """The rows of the scope in ``areas`` read and held (:func:`.audit_facts.hold_rows`)
        when they are few and of the same columns, with ``diff_area``'s too when they fit;
        False when not."""
        et = project_model(project, scope.model).event_time
        if self.held_rows <= 0 or not et or not areas or areas[0] != PUBLISHED:
            return False
        found = [self._source(cur, project, scope.model, a, False) for a in areas]
        sides = [s for s in found if s is not None]
        if len(sides) != len(areas) or any(not _same_types(sides[0][1], s[1]) for s in sides):
            return False
        if not self._rows_at_most(cur, [rel for rel, _ in sides], self.held_rows):
            return False
        extra = (
            None if diff_area in areas else self._source(cur, project, scope.model, diff_area, True)
        )
        if (
            extra is not None
            and extra[0] not in [rel for rel, _ in sides]
            and _same_types(sides[0][1], extra[1])
            and self._rows_at_most(cur, [rel for rel, _ in (*sides, extra)], self.held_rows)
        ):
            sides.append(extra)  # the diff's new side: no query of its own (see _held_pair)
        import pyarrow as pa

        def fetch(sql: str) -> Any:
            with self._arrow(sql) as rows:
                return pa.table(rows)

        self._label(f"backfill: rows of {scope.model}")
        held = hold_rows(
            self.dialect,
            fetch,
            et,
            scope,
            sides,
            self._select_list(sides[0][1]),
            self._few_rows_of,
        )
        if held:
            log.debug("audit of %s: rows read whole in one query", scope.model)
        return held

    def _few_rows_of(self, rel: str, parts: int) -> str:
        """``rel`` (of at most ``held_rows`` rows, see :meth:`_rows_at_most`) as a read of
        all its rows in ``parts`` partitions at once is best written here: ``rel`` itself
        unless the engine knows better."""
        return rel

    def _rows_at_most(self, cur: Any, rels: Sequence[str], limit: int) -> bool:
        """Whether the relations ``rels`` hold at most ``limit`` rows in all, as the
        warehouse's metadata tells without a query (False: not known)."""
        return False

    # -- publishing ------------------------------------------------------------------------------
    def publish(self, project: Project, request: PublishRequest) -> PublishResult:
        views = {
            pm.model: self.render(project, pm.model, None, None, PUBLISHED)
            for pm in request.models
            if pm.restore is None and project.models[pm.model].strategy == "view"
        }
        kept: list[KeptModel] = []
        overwritten: dict[str, list[str]] = {}
        last: list[tuple[Rel, Callable[[], None]]] = []  # partition exchanges: see _defer
        with self.connect() as cur, self._publishing(cur, project, request):
            # Every check before any swap: a published view reads tables swapped before it.
            for pm in request.models:
                stale = self._stale(cur, project, pm)
                if stale and not request.overwrite_stale:
                    raise StalePublishedError(pm.model, stale)
                if stale:
                    overwritten[pm.model] = stale
            if request.publication_id is not None and request.models:
                self._ensure_backup_schema(cur, backup_schema(request.publication_id))
            self._scopes.last = last
            try:
                for pm in request.models:
                    kept.append(
                        self._swap(
                            cur,
                            project,
                            request,
                            pm,
                            views.get(pm.model),
                            overwritten.get(pm.model, ()),
                        )
                    )
            finally:
                self._scopes.last = None
            if request.publication_id is not None:
                self._record_version(cur, request, kept)
            self._append_changelog(cur, request)
            if last:
                self._lock_exclusive(cur, sorted({rel for rel, _ in last}))
            for _, action in last:
                action()
        return PublishResult(tuple(kept), overwritten)

    def _write_version(self) -> str | None:
        """The version of the area (see :meth:`Engine.version`) this thread's last
        :meth:`_write` made; None: the engine names none."""
        return None

    def _defer(self, table: Rel, action: Callable[[], None]) -> None:
        """Runs ``action`` last in the publish's transaction, after every check, copy and the
        changelog: a partition exchange, whose DETACH makes readers of the published ``table``
        wait until the commit (ACCESS EXCLUSIVE), so it comes when nothing else is left to do,
        with the locks of every such table taken first, together (see
        :meth:`_lock_exclusive`)."""
        last: list[tuple[Rel, Callable[[], None]]] | None = getattr(self._scopes, "last", None)
        if last is None:  # not inside publish(): nothing else is left to wait for
            action()
        else:
            last.append((table, action))

    def _lock_exclusive(self, cur: Any, tables: Sequence[Rel]) -> None:
        """Takes ACCESS EXCLUSIVE locks on ``tables`` (a publish's partitioned tables, before
        its exchanges) in the publish's transaction."""
        listed = ", ".join(self.dialect.qualified(t) for t in tables)
        cur.execute(f"LOCK TABLE {listed} IN ACCESS EXCLUSIVE MODE")

    def _record_version(
        self, cur: Any, request: PublishRequest, kept: Sequence[KeptModel]
    ) -> PublishedVersion:
        """Records what the publish kept in ``backfill_versions``, in its transaction; returns
        it as :meth:`published_versions` reads it back."""
        assert request.publication_id is not None
        d = self.dialect
        table = d.qualified((self.schema, VERSIONS_TABLE))
        text = d.changelog_type(ColumnKind.STRING)
        cols = ", ".join(f"{d.quote(n)} {text}" for n in VERSIONS_COLUMNS)
        cur.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols}) {d.table_options}".rstrip())
        version = PublishedVersion(
            request.publication_id,
            request.backfill_id,
            request.restores,
            request.published_at,
            request.keep_until,
            tuple(kept),
        )
        row = (*(getattr(version, n) for n in VERSIONS_COLUMNS[:-1]), version.models_json())
        self._insert_rows(cur, table, VERSIONS_COLUMNS, [row])
        return version_of_row(row)

    def published_versions(self, project: Project) -> list[PublishedVersion]:
        rel = (self.schema, VERSIONS_TABLE)
        with self.connect() as cur:
            if self._kind(cur, rel) is None:
                return []
            rows = self._rows(cur, self._versions_query(self.dialect.qualified(rel)))
        return [version_of_row(r) for r in rows]

    def _versions_query(self, relation: str) -> str:
        """The query of every recorded version in ``relation``, in the order they are listed."""
        names = ", ".join(self.dialect.quote(n) for n in VERSIONS_COLUMNS)
        return f"SELECT {names} FROM {relation} ORDER BY published_at, publication_id"

    def drop_backup(self, publication_id: str) -> None:
        with self.connect() as cur:
            cur.execute(
                f"DROP SCHEMA IF EXISTS {self.dialect.quote(backup_schema(publication_id))} CASCADE"
            )

    def backup_rows(self, publication_id: str) -> int | None:
        d = self.dialect
        schema = backup_schema(publication_id)
        with self.connect() as cur:
            tables = self._tables_of(cur, schema)
            if not tables:
                return None
            return sum(
                self._one(cur, f"SELECT count(*) FROM {d.qualified((schema, t))}")
                for t in tables
                if not t.endswith(_KEYS)
            )

    def _ensure_backup_schema(self, cur: Any, schema: str) -> None:
        """The publication's backup schema, made in the publish's transaction (a failed publish
        leaves none)."""
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {self.dialect.quote(schema)}")

    @contextlib.contextmanager
    def _publishing(self, cur: Any, project: Project, request: PublishRequest) -> Iterator[None]:
        """What holds a publish together while its models are checked and swapped: by default
        one transaction that locks out other publishes and the writers of the published
        relations (all or nothing); an engine without multi-table transactions (Spark) undoes
        the swaps made so far when one fails."""
        with self._transaction(cur):
            self._lock_publish(cur, [self.published(project, pm.model) for pm in request.models])
            yield

    def _stale(self, cur: Any, project: Project, pm: PublishModel) -> list[str]:
        """Partitions whose published fingerprint differs from the one recorded at audit time
        (for a rollback: right after the publication it takes back)."""
        pub = self.published(project, pm.model)
        recorded = pm.published_fingerprints
        seen = pm.versions.get("published")
        if (
            pm.restore is None
            and seen is not None
            and self.version(project, pm.model, PUBLISHED) == seen
        ):
            # The version the audit fingerprinted is still the published one (a snapshot never
            # changes): a scan would find the recorded fingerprints again.
            log.debug("%s: published version %s unchanged since the audit", pm.model, seen)
            return []
        cols = self._columns(cur, pub)
        if cols is None:
            return [label for label, fp in recorded.items() if fp.rows != 0]
        event_time = self._event_time(project, pm)
        parts = pm.restore.parts if pm.restore is not None else pm.parts
        source = self.dialect.qualified(pub)
        if event_time and len(parts) > 1 and set(recorded) == {p[0] for p in parts}:
            # One filtered scan of the backfilled periods against the sum of the recorded
            # fingerprints: equal unless a partition changed (up to a hash collision, as any
            # fingerprint). Only a mismatch pays the per-partition scan, which names them.
            periods = [(s, e) for _, s, e in parts]
            where = self.dialect.in_periods(event_time, periods, _kind_in(cols, event_time), "t")
            total = self._fingerprint_where(cur, source, cols, where)
            if total == PartitionFingerprint.total(recorded.values()):
                return []
            if self._stale_by_legacy_hash(cur, source, cols, where, recorded) == []:
                return []
        now = self._fingerprint_parts(cur, source, cols, event_time, parts)
        stale = [label for label in recorded if now.get(label) != recorded[label]]
        if not stale:
            return []
        # Recorded before an upgrade? Each changed partition by the earlier hash.
        kind = _kind_in(cols, event_time or "")
        bounds = {label: (s, e) for label, s, e in parts}
        still: list[str] = []
        for label in stale:
            if event_time and label in bounds:
                where = self.dialect.in_periods(event_time, [bounds[label]], kind, "t")
            elif label == WHOLE:
                where = "TRUE"
            else:
                still.append(label)
                continue
            still += self._stale_by_legacy_hash(cur, source, cols, where, {label: recorded[label]})
        return still

    def _stale_by_legacy_hash(
        self,
        cur: Any,
        source: str,
        cols: Sequence[Column],
        where: str,
        recorded: Mapping[str, PartitionFingerprint],
    ) -> list[str]:
        """``recorded``'s labels (all of them: the rows of ``where``, on alias ``t``, are
        their partitions) unless the fingerprint of those rows by the row hash of earlier
        versions is their total: an audit or a publication recorded by an earlier version
        (before an upgrade) holds fingerprints of that hash, which the current one
        (PostgreSQL's hash_record_extended) never matches. Which hash a fingerprint was
        recorded with is not stored (its stored form has no room for it), so a publish tries
        the earlier one only where the current one finds a partition changed."""
        legacy = self.dialect.legacy_row_hash(cols, "t")
        if legacy is None:
            return list(recorded)
        old = fingerprint_where(
            self.dialect, self._reader(cur), source, cols, where, row_hash=legacy
        )
        return [] if old == PartitionFingerprint.total(recorded.values()) else list(recorded)

    @staticmethod
    def _event_time(project: Project, pm: PublishModel) -> str | None:
        m = project.models.get(pm.model)
        return m.event_time if m is not None else None

    def _swap(
        self,
        cur: Any,
        project: Project,
        request: PublishRequest,
        pm: PublishModel,
        view_sql: str | None = None,
        stale: Sequence[str] = (),
    ) -> KeptModel:
        """Publishes ``pm``'s new rows (the audit area's; a rollback's: what the publication it
        takes back kept) and keeps what they replace under ``request.publication_id`` (of a
        replace, the partitions that change: ``stale`` ones changed since the audit)."""
        rel = self.published(project, pm.model)
        kind = self._kind(cur, rel)
        backup = (
            None
            if request.publication_id is None
            else (backup_schema(request.publication_id), rel[1])
        )
        if pm.restore is not None:
            assert request.restores is not None
            return self._restore(cur, project, pm, rel, kind, backup, request.restores, stale)
        m = project.models[pm.model]
        if m.strategy == "view":
            assert view_sql is not None
            kept = self._keep_whole(cur, pm, rel, kind, backup, "view")
            self._replace_view(cur, rel, view_sql)
            return kept
        new_rel = self.location(project, pm.model, request.area)
        new = self.dialect.qualified(new_rel)
        new_cols = self._columns(cur, new_rel) or []
        split = bool(pm.parts) and self.partitioning.wanted(m, pm.model)
        if kind is None:  # a first publish: into a schema that may not be there yet
            self._ensure_schema(cur, rel[0])
        if kind is None and split and self._table_partitions_of(cur, m, new_rel):
            # A first publish of a partitioned model: its table is made partitioned, and the
            # area's partitions are attached to it (a rollback drops it: it did not exist).
            self.partitioning.create_table(cur, m, rel, new, new_cols)
            first = self.partitioning.publish(cur, m, pm, (rel, new_rel, None), stale, self._defer)
            assert first is not None
            return dataclasses.replace(first, existed=False, rows=0)
        if kind != "table" or m.strategy == "full" or not pm.parts or not m.event_time:
            kept = self._keep_whole(cur, pm, rel, kind, backup, "full")
            if kind == "view":  # the model was a view, is now a table
                cur.execute(f"DROP VIEW {self.dialect.qualified(rel)}")
            self._replace_table(cur, rel, new, new_cols)
            return self._kept_after(cur, project, pm, rel, kept, pm.new_fingerprints)
        self._same_columns(cur, pm.model, rel, [c.name for c in new_cols])
        if m.strategy == "merge" and m.unique_key:
            keys = tuple(m.unique_key)
            kept = self._keep_keys(cur, pm, rel, backup, keys, f"(SELECT * FROM {new})")
            pub = self.dialect.qualified(rel)
            self._merge(cur, pub, new, [c.name for c in new_cols], keys)
            return self._kept_after(cur, project, pm, rel, kept, {})
        if split:
            sides = (rel, new_rel, backup)
            exchanged = self.partitioning.publish(cur, m, pm, sides, stale, self._defer)
            if exchanged is not None:
                return exchanged
            # A table left alone (not partitioned by the event time, or the area's is not):
            # its periods are copied, into partitions made for them where it has them.
            self.partitioning.ensure(cur, m, rel, [(s, e) for _, s, e in pm.parts], own=False)
        same = pm.unchanged(stale)
        changed = [p for p in pm.parts if p[0] not in same]
        kept = self._keep_periods(cur, pm, rel, backup, m.event_time, changed, stale)
        kept = dataclasses.replace(kept, unchanged=tuple(sorted(same)))
        self._replace_periods(cur, rel, new, m.event_time, pm.parts)
        after = {label: fp for label, fp in pm.new_fingerprints.items() if label not in same}
        return self._kept_after(cur, project, pm, rel, kept, after)

    def _table_partitions_of(self, cur: Any, m: Model, rel: Rel) -> bool:
        """Whether ``rel`` is partitioned by range of ``m``'s event time."""
        col = next((c for c in self._columns(cur, rel) or [] if c.name == m.event_time), None)
        return col is not None and self._table_partitions(cur, rel, col) is not None

    def _restore(
        self,
        cur: Any,
        project: Project,
        pm: PublishModel,
        rel: Rel,
        kind: str | None,
        backup: Rel | None,
        restores: str,
        stale: Sequence[str] = (),
    ) -> KeptModel:
        """Puts back what the publication ``restores`` kept of ``pm``'s model (a rollback),
        keeping what is published now under ``backup``."""
        d = self.dialect
        kept_then = pm.restore
        assert kept_then is not None
        old = (backup_schema(restores), rel[1])
        src = d.qualified(old)
        pub = d.qualified(rel)
        event_time = self._event_time(project, pm)
        strategy = kept_then.strategy
        if not kept_then.existed or strategy in ("full", "view"):
            kept = self._keep_whole(cur, pm, rel, kind, backup, "full")
            if kept_then.existed and strategy == "full":
                self._replace_table(cur, rel, src, self._columns(cur, old) or [])
                return self._kept_after(cur, project, pm, rel, kept, {})
            # Nothing was published before (or a view): what is there now goes.
            if kind is not None:
                cur.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {pub}")
            if kept_then.definition:
                cur.execute(f"CREATE VIEW {pub} AS {kept_then.definition}")
            return kept
        if strategy == "merge":
            keys_rel = d.qualified((old[0], old[1] + _KEYS))
            kept = self._keep_keys(cur, pm, rel, backup, kept_then.keys, keys_rel)
            cur.execute(f"DELETE FROM {pub} t WHERE {self._has_key(keys_rel, kept_then.keys)}")
            cur.execute(d.insert(pub, src, [c.name for c in self._columns(cur, old) or []]))
            return self._kept_after(cur, project, pm, rel, kept, {})
        if kept_then.restores_nothing:
            return KeptModel(pm.model, "replace", True)
        if not event_time:
            raise ConflictError(
                f"{pm.model}: the model has no event_time now; its periods cannot be put back "
                "(restore its event_time in the project, then roll back)"
            )
        m = project.models.get(pm.model)
        if m is not None and m.event_time == event_time and self.partitioning.wanted(m, pm.model):
            sides = (rel, old, backup)
            exchanged = self.partitioning.restore(cur, m, pm, sides, stale, self._defer)
            if exchanged is not None:
                return exchanged
            periods = [(s, e) for _, s, e in kept_then.parts]
            self.partitioning.ensure(cur, m, rel, periods, own=False)
        kept = self._keep_periods(cur, pm, rel, backup, event_time, kept_then.parts, stale)
        self._replace_periods(cur, rel, src, event_time, kept_then.parts)
        return self._kept_after(cur, project, pm, rel, kept, {})

    def _same_columns(self, cur: Any, model: str, rel: Rel, new_names: Sequence[str]) -> None:
        old_names = {c.name for c in self._columns(cur, rel) or []}
        if old_names != set(new_names):
            raise ConflictError(
                f"{model}: the backfill changes its columns "
                f"({sorted(old_names ^ set(new_names))}); publishing some partitions "
                "cannot change a table's schema -- rebuild the model with strategy full"
            )

    def _replace_periods(
        self, cur: Any, rel: Rel, source: str, event_time: str, parts: Sequence[Part]
    ) -> None:
        """The rows of ``rel`` in ``parts``' periods become the rows of ``source``."""
        d = self.dialect
        pub = d.qualified(rel)
        names = [c.name for c in self._columns(cur, rel) or []]
        periods = [(s, e) for _, s, e in parts]
        cur.execute(f"DELETE FROM {pub} WHERE {d.in_periods(event_time, periods)}")
        cur.execute(d.insert(pub, source, names))

    def _has_key(self, keys_rel: str, keys: Sequence[str]) -> str:
        """A condition on alias ``t``: its key is one of ``keys_rel``'s (NULL keys match none,
        as in a MERGE's ON)."""
        q = self.dialect.quote
        on = " AND ".join(f"k.{q(c)} = t.{q(c)}" for c in keys)
        return f"EXISTS (SELECT 1 FROM {keys_rel} k WHERE {on})"

    # -- keeping what a publish replaces (see backfill.versions) --------------------------------
    def _keep_whole(
        self,
        cur: Any,
        pm: PublishModel,
        rel: Rel,
        kind: str | None,
        backup: Rel | None,
        strategy: str,
    ) -> KeptModel:
        """Keeps the whole published relation: a table's rows, a view's definition; nothing
        (``existed=False``) when there is none."""
        if kind is None:
            return KeptModel(pm.model, strategy, existed=False)
        if kind == "view":
            return KeptModel(pm.model, "view", True, definition=self._view_sql(cur, rel))
        rows = self._keep_where(cur, rel, backup, "TRUE")
        return KeptModel(pm.model, "full", True, rows=rows)

    def _keep_periods(
        self,
        cur: Any,
        pm: PublishModel,
        rel: Rel,
        backup: Rel | None,
        event_time: str,
        parts: Sequence[Part],
        stale: Sequence[str] = (),
    ) -> KeptModel:
        periods = [(s, e) for _, s, e in parts]
        where = self.dialect.in_periods(event_time, periods)
        # The rows kept are those the stale check just found, unless a partition moved since.
        recorded = pm.published_fingerprints
        labels = [label for label, _, _ in parts]
        known = (
            sum(recorded[label].rows for label in labels)
            if all(label in recorded and label not in stale for label in labels)
            else None
        )
        rows = self._keep_where(cur, rel, backup, where, known) if parts else 0
        return KeptModel(pm.model, "replace", True, tuple(parts), rows=rows)

    def _keep_keys(
        self,
        cur: Any,
        pm: PublishModel,
        rel: Rel,
        backup: Rel | None,
        keys: Sequence[str],
        keyed: str,
    ) -> KeptModel:
        """Keeps the published rows whose key ``keyed`` (a relation or query with the key
        columns) holds, and those keys (``<name>__keys``): a rollback deletes the rows of every
        such key and puts the kept rows back."""
        d = self.dialect
        if backup is not None:
            listed = ", ".join(d.quote(k) for k in keys)
            keys_rel = d.qualified((backup[0], backup[1] + _KEYS))
            cur.execute(f"CREATE TABLE {keys_rel} AS SELECT DISTINCT {listed} FROM {keyed} k")
            rows = self._keep_where(cur, rel, backup, self._has_key(keys_rel, keys))
        else:
            rows = 0
        return KeptModel(pm.model, "merge", True, tuple(pm.parts), tuple(keys), rows=rows)

    def _keep_where(
        self, cur: Any, rel: Rel, backup: Rel | None, where: str, rows: int | None = None
    ) -> int:
        """Copies the rows of ``rel`` matching ``where`` (on alias ``t``) into the table
        ``backup`` in the publish's transaction; returns how many (``rows`` when the caller
        knows; 0 when nothing is kept)."""
        if backup is None:
            return 0
        d = self.dialect
        target = d.qualified(backup)
        cur.execute(f"CREATE TABLE {target} AS SELECT * FROM {d.qualified(rel)} t WHERE {where}")
        return rows if rows is not None else self._one(cur, f"SELECT count(*) FROM {target}")

    def _kept_after(
        self,
        cur: Any,
        project: Project,
        pm: PublishModel,
        rel: Rel,
        kept: KeptModel,
        known: Mapping[str, PartitionFingerprint],
    ) -> KeptModel:
        """``kept`` with the published fingerprints right after the swap: ``known`` (the new
        rows', from the audit) or fingerprinted now, in the publish's transaction."""
        if kept.restores_nothing:
            return kept  # published unchanged: no partition of it for a rollback to check
        parts = kept.parts if kept.strategy != "full" else ()
        if known and set(known) == ({label for label, _, _ in parts} if parts else {WHOLE}):
            return dataclasses.replace(kept, after=dict(known))
        cols = self._columns(cur, rel) or []
        event_time = self._event_time(project, pm) if parts else None
        source = self.dialect.qualified(rel)
        after = self._fingerprint_parts(cur, source, cols, event_time, parts)
        return dataclasses.replace(kept, after=after)

    def _view_sql(self, cur: Any, rel: Rel) -> str | None:
        """The SELECT a view of the warehouse runs (kept by a publish that replaces it)."""
        return None

    def _changelog(self) -> Rel:
        return (self.schema, CHANGELOG_TABLE)

    def _append_changelog(self, cur: Any, request: PublishRequest) -> None:
        """Creates (or upgrades) the changelog table and appends the request's rows, in the
        publish's transaction."""
        d = self.dialect
        rel = self._changelog()
        table = d.qualified(rel)
        cols = ", ".join(f"{d.quote(n)} {d.changelog_type(k, n)}" for n, k in CHANGELOG_COLUMNS)
        cur.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols}) {d.table_options}".rstrip())
        # A table of an earlier version: add the columns added since, and make approximate
        # measure values exact decimals (where the warehouse can).
        have = {c.name: c.kind for c in self._columns(cur, rel) or []}
        for name, kind in CHANGELOG_COLUMNS:
            if name in CHANGELOG_ADDED and name not in have:
                cur.execute(
                    f"ALTER TABLE {table} ADD COLUMN {d.quote(name)} {d.changelog_type(kind)}"
                )
            elif (
                kind == ColumnKind.DECIMAL
                and have.get(name) == ColumnKind.FLOAT
                and d.retype_columns
            ):
                cur.execute(
                    f"ALTER TABLE {table} ALTER COLUMN {d.quote(name)} "
                    f"TYPE {d.changelog_type(kind)}"
                )
        if request.changelog:
            self._insert_rows(cur, table, [n for n, _ in CHANGELOG_COLUMNS], request.changelog)

    def changelog_rows(
        self,
        project: Project,
        backfill_id: str | None = None,
    ) -> list[tuple[Any, ...]]:
        d = self.dialect
        rel = self._changelog()
        with self.connect() as cur:
            if self._kind(cur, rel) is None:
                return []
            names = ", ".join(d.quote(n) for n, _ in CHANGELOG_COLUMNS)
            where = f"WHERE backfill_id = {d.string(backfill_id)}" if backfill_id else ""
            return self._rows(
                cur,
                f"SELECT {names} FROM {d.qualified(rel)} {where} ORDER BY published_at DESC, "
                f"model, {d.quote('partition')} NULLS FIRST, measure NULLS FIRST",
            )


def fingerprint_where(
    dialect: Dialect,
    run: Callable[[str], list[tuple[Any, ...]]],
    source: str,
    columns: Sequence[Column],
    where: str = "TRUE",
    *,
    row_hash: str | None = None,
) -> PartitionFingerprint:
    """Fingerprint of the rows of ``source`` (a relation or parenthesized query, its
    ``columns``) matching ``where`` (on alias ``t``): row count and the sum of the row hashes
    (``row_hash``, default the dialect's :meth:`~.Dialect.row_hash`) modulo 2^64. ``run`` runs
    a query and returns its rows."""
    h = dialect.digest(row_hash or dialect.row_hash(columns, "t"))
    n, digest = run(f"SELECT count(*), {h} FROM {source} t WHERE {where}")[0]
    return PartitionFingerprint.of(int(str(n)), int(str(digest)))


def fingerprint_parts(
    dialect: Dialect,
    run: Callable[[str], list[tuple[Any, ...]]],
    source: str,
    columns: Sequence[Column],
    event_time: tuple[str | None, ColumnKind | None],
    parts: Sequence[Part],
) -> dict[str, PartitionFingerprint]:
    """label -> fingerprint per (label, start, end) partition of ``source`` on the column
    ``event_time`` (its name and kind) in one scan (the dialect's :meth:`~.Dialect.parts_scan`);
    the whole relation under ``"all"`` when there are no partitions."""
    column, kind = event_time
    if not parts or not column:
        return {WHOLE: fingerprint_where(dialect, run, source, columns)}
    ordered = sorted(parts, key=lambda p: p[1])
    if any(a[2] > b[1] for a, b in itertools.pairwise(ordered)):  # overlapping: one by one
        return {
            label: fingerprint_where(
                dialect, run, source, columns, dialect.in_periods(column, [(s, e)], kind, "t")
            )
            for label, s, e in parts
        }
    return parts_found(run(dialect.parts_scan(source, columns, column, kind, parts)), parts)


def parts_found(
    rows: Sequence[tuple[Any, ...]], parts: Sequence[Part]
) -> dict[str, PartitionFingerprint]:
    """label -> fingerprint of each of ``parts`` from the rows (index in ``parts``, row count,
    digest) of :meth:`~.Dialect.parts_scan` or :meth:`~.Dialect.insert_fingerprinted` (rows of
    a NULL index, outside every partition, are left out); empty where none came."""
    found = {
        int(str(i)): PartitionFingerprint.of(int(str(n)), int(str(d)))
        for i, n, d in rows
        if i is not None
    }
    empty = PartitionFingerprint.empty()
    return {label: found.get(i, empty) for i, (label, _, _) in enumerate(parts)}


@contextlib.contextmanager
def _begin_commit(cur: Any, errors: tuple[type[Exception], ...]) -> Iterator[Any]:
    """:meth:`SqlEngine._transaction` in SQL; ``errors``: the warehouse's."""
    cur.execute("BEGIN TRANSACTION")
    try:
        yield cur
    except BaseException:
        # Any error of the block (a warehouse error, a bug, Ctrl-C) rolls back and goes on as
        # it is: nothing is caught. Not a finally: only a failure rolls back. A failed ROLLBACK
        # (the connection already gone) must not hide the block's error.
        with contextlib.suppress(*errors):
            cur.execute("ROLLBACK")
        raise
    cur.execute("COMMIT")


def _tiles(parts: Sequence[Part], window: tuple[dt.datetime, dt.datetime]) -> bool:
    """Whether ``parts`` (in time order) tile ``window`` exactly."""
    return (
        parts[0][1] == window[0]
        and parts[-1][2] == window[1]
        and all(a[2] == b[1] for a, b in itertools.pairwise(parts))
    )


def _same_types(a: Sequence[Column], b: Sequence[Column]) -> bool:
    """Whether two lists of columns name the same columns, of the same types."""
    return {c.name: c.type for c in a} == {c.name: c.type for c in b}


def _kind_in(cols: Sequence[Column], name: str | None) -> ColumnKind | None:
    return next((c.kind for c in cols if c.name == name), None)


def version_of_row(row: Sequence[Any]) -> PublishedVersion:
    """A row of ``backfill_versions`` (in :data:`VERSIONS_COLUMNS`' order) as its record."""
    pub, bid, rolls_back, published_at, keep_until, models = row
    return PublishedVersion(
        str(pub),
        str(bid),
        None if rolls_back is None else str(rolls_back),
        str(published_at),
        None if keep_until is None else str(keep_until),
        decode_models(str(models), f"{VERSIONS_TABLE} {pub}"),
    )


def version_order(v: PublishedVersion) -> tuple[str, str]:
    """The order :meth:`SqlEngine.published_versions` lists versions in."""
    return (v.published_at, v.publication_id)
