"""The PostgreSQL engine: ``engine: {type: postgres, url: postgresql://..., schema: public}``.

Published models live in ``schema``; backfill ``bf_...`` writes into the schema
``audit_bf_...``. Inside an audit area ``ref("m")`` to a model the backfill rebuilds reads

    (SELECT a, b, ... FROM audit.m UNION ALL
     SELECT a, b, ... FROM public.m WHERE NOT (event_time in the backfilled periods))

with the columns selected by name from the catalog (Postgres has no ``UNION ALL BY NAME``).
Postgres 15 wants an alias after a subquery in FROM: write ``{{ ref("m") }} m``.

A task is one transaction on a pooled connection: the SELECT goes into a temporary table, rows
outside the period fail the task, then ``replace`` deletes the period and inserts, ``merge`` runs
``MERGE`` on the unique key, ``full`` replaces the table's rows (or the table when its columns
change), ``view`` re-creates the view. Concurrent tasks of one model are safe: replace tasks touch
disjoint periods; the first creation of a table, merges (whose keys may cross periods) and full
rebuilds take a transaction-scoped advisory lock on the relation. Serialization failures,
deadlocks, lock timeouts and lost connections are transient (retried); SQL errors are not.

Fingerprints are computed in the database (see :mod:`.sql`); :meth:`PostgresEngine.stream`
sends only the requested periods to the C++ diff as Arrow batches through ADBC (see
:mod:`.arrow`). Publish is ONE transaction for every model and the changelog (see
:mod:`.publish`): a concurrent reader sees all old or all new.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import PoolTimeout

from ..._numbers import Number, to_kind
from ..._numbers import kind_of as value_kind
from ...errors import InvalidInputError, NotFoundError
from ...model.files import EngineSettings, render
from ..base import (
    Area,
    Capabilities,
    Column,
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
from .arrow import select_list, to_arrow
from .connection import Database, PostgresConnectionError, mask_url, task_failure
from .sql import (
    TableColumn,
    audit_schema,
    fingerprint_parts,
    fingerprint_where,
    in_periods,
    one,
    qualified,
    quote,
    relation_kind,
    table_columns,
)
from .writes import drop_relation, lock_relation, merge, replace_table

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Model, Project

log = logging.getLogger(__name__)

__all__ = ["PostgresEngine"]

_TMP = quote("__backfill_new")


class PostgresEngine(Engine):
    """PostgreSQL warehouse at ``url``; published models in ``schema``.

    ``pool_size`` bounds the pooled connections (at least the run's concurrency);
    ``connect_timeout`` is in seconds; ``conflict_retries`` bounds in-task retries of
    serialization failures and deadlocks. With ``check`` (default) the constructor connects
    once and verifies the permissions the engine needs, so a bad URL, password or grant fails
    before anything is written. ``naming`` gives the published (schema, name) of a model
    (default ``(schema, model)``; a dbt project names them after its manifest).
    """

    name = "postgres"
    capabilities = Capabilities(atomic_publish=True, embedded=False, interrupt=True)

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        pool_size: int = 8,
        connect_timeout: float = 10.0,
        conflict_retries: int = 5,
        check: bool = True,
        naming: Callable[[str], tuple[str, str]] | None = None,
    ) -> None:
        self.schema = schema
        self._naming = naming
        self.conflict_retries = conflict_retries
        self.db = Database(url, pool_size=pool_size, connect_timeout=connect_timeout)
        if check:
            self.db.check(schema)

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> PostgresEngine:
        """The engine ``engine: {type: postgres, url: ..., ...}`` of backfill.yml names."""
        options = dict(settings.options)
        url = options.pop("url", None)
        if not isinstance(url, str):
            raise InvalidInputError("engine type postgres needs url: postgresql://...")
        return cls(url, schema=settings.schema, **options)

    def __repr__(self) -> str:
        return f"PostgresEngine({mask_url(self.db.url)!r}, schema={self.schema!r})"

    def close(self) -> None:
        self.db.close()

    def interrupt(self) -> None:
        self.db.interrupt()

    @contextlib.contextmanager
    def connect(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit; ``conn.transaction()`` for a transaction)."""
        with self.db.connection() as conn:
            yield conn

    # -- naming and rendering ------------------------------------------------------------------
    def published(self, model: str) -> tuple[str, str]:
        return self._naming(model) if self._naming is not None else (self.schema, model)

    def relation(self, model: str, area: Area) -> tuple[str, str]:
        """(schema, name) ``model`` is written to in ``area``."""
        return (
            self.published(model) if area.direct else (audit_schema(str(area.backfill_id)), model)
        )

    def _ref(self, project: Project, area: Area, conn: psycopg.Connection[Any], name: str) -> str:
        """What a read of ``name`` sees in ``area``: the backfill's new rows for its periods and
        the published rows elsewhere (the new table alone for full rebuilds)."""
        pub = self.published(name)
        if area.direct or name not in area.periods:
            return qualified(*pub)
        model = project.models[name]
        new = self.relation(name, area)
        pub_cols = table_columns(conn, *pub)
        new_cols = table_columns(conn, *new)
        if model.strategy in ("full", "view") or not model.event_time:
            return qualified(*new) if new_cols is not None or pub_cols is None else qualified(*pub)
        if pub_cols is None:
            return qualified(*new)
        keep = in_periods(model.event_time, area.periods[name])
        outside = f"FROM {qualified(*pub)} WHERE NOT coalesce({keep}, FALSE)"
        if new_cols is None:  # no new rows written yet
            return f"(SELECT * {outside})"
        names = [c.name for c in new_cols]
        names += [c.name for c in pub_cols if c.name not in names]
        have_new = {c.name for c in new_cols}
        have_pub = {c.name for c in pub_cols}
        left = ", ".join(quote(n) if n in have_new else f"NULL AS {quote(n)}" for n in names)
        right = ", ".join(quote(n) if n in have_pub else f"NULL AS {quote(n)}" for n in names)
        return f"(SELECT {left} FROM {qualified(*new)} UNION ALL SELECT {right} {outside})"

    def _render(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
        conn: psycopg.Connection[Any],
    ) -> str:
        m = project_model(project, model)

        def ref(name: str, **_: object) -> str:
            if name not in project.models:
                raise NotFoundError(f"ref({name!r}) names no model")
            return self._ref(project, area, conn, name)

        def source(schema: str, table: str) -> str:
            return qualified(schema, table)

        def is_incremental() -> bool:
            return relation_kind(conn, *self.published(model)) is not None or (
                not area.direct and relation_kind(conn, *self.relation(model, area)) is not None
            )

        this = (
            self._ref(project, area, conn, model)
            if not area.direct
            else qualified(*self.relation(model, area))
        )
        return render(
            m.sql or "",
            start=start,
            end=end,
            ref=ref,
            source=source,
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
        with self.connect() as conn:
            return self._render(project, model, start, end, area, conn)

    # -- writing ------------------------------------------------------------------------------
    def run_task(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> WriteResult:
        m = project_model(project, model)
        began = time.perf_counter()
        conflicts = 0
        delay = 0.01
        while True:
            try:
                with self.connect() as conn:
                    rows, deleted, fp = self._write(conn, project, m, start, end, area)
                    if m.strategy != "view":
                        _analyze_if_stale(conn, *self.relation(m.name, area), rows)
                return WriteResult(rows, deleted, fp, time.perf_counter() - began, conflicts)
            except TaskFailure:
                raise
            except PostgresConnectionError as exc:
                raise TaskFailure(
                    f"{model_location(project, model)}: {exc}", transient=True
                ) from None
            except (psycopg.Error, PoolTimeout) as exc:
                failure = task_failure(model_location(project, model), exc)
                state = getattr(exc, "sqlstate", None)
                if state not in ("40001", "40P01") or conflicts >= self.conflict_retries:
                    raise failure from None
                conflicts += 1
                log.debug("%s: %s, retrying", model, failure)
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    def _ensure_schema(self, conn: psycopg.Connection[Any], schema: str) -> None:
        """Creates ``schema`` if missing, in its own transaction: concurrent first tasks would
        otherwise race on CREATE SCHEMA IF NOT EXISTS (a unique violation in the catalog)."""
        if one(conn, "SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema]):
            return
        with conn.transaction():
            lock_relation(conn, schema, "")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")

    def _write(
        self,
        conn: psycopg.Connection[Any],
        project: Project,
        m: Model,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> tuple[int, int, PartitionFingerprint]:
        schema, name = self.relation(m.name, area)
        target = qualified(schema, name)
        # replace/merge/append write one period; full and view rebuild the whole relation.
        partitioned = (
            start is not None and end is not None and m.strategy in ("replace", "merge", "append")
        )
        if m.strategy in ("replace", "merge", "append") and m.grain and not partitioned:
            raise TaskFailure(
                f"{model_location(project, m.name)}: a {m.strategy} task needs a period",
                transient=False,
            )
        self._ensure_schema(conn, schema)
        with conn.transaction():
            sql = self._render(project, m.name, start, end, area, conn)
            if m.strategy == "view":
                lock_relation(conn, schema, name)
                drop_relation(conn, schema, name)
                conn.execute(f"CREATE VIEW {target} AS {sql}")
                view_cols = [c.name for c in table_columns(conn, schema, name) or []]
                fp = fingerprint_where(conn, target, view_cols)
                return fp.rows, 0, fp
            conn.execute(f"CREATE TEMP TABLE {_TMP} ON COMMIT DROP AS {sql}")
            in_period = ""
            if partitioned:
                assert start is not None and end is not None and m.event_time
                in_period = in_periods(m.event_time, [(start, end)])
                outside = one(
                    conn, f"SELECT count(*) FROM {_TMP} WHERE NOT coalesce({in_period}, FALSE)"
                )
                if outside:
                    raise TaskFailure(
                        f"{model_location(project, m.name)}: the SELECT returned {outside} row(s) with "
                        f"{m.event_time} outside the task's period [{start:%Y-%m-%d %H:%M}, "
                        f"{end:%Y-%m-%d %H:%M}) UTC (or NULL); a task writes exactly its period: "
                        "filter the inputs with {{ start }} and {{ end }}",
                        transient=False,
                    )
            new_types = _tmp_columns(conn)
            new_cols = [n for n, _ in new_types]
            new_rows = one(conn, f"SELECT count(*) FROM {_TMP}")
            deleted = 0
            if m.strategy == "full" or not partitioned:
                lock_relation(conn, schema, name)
                deleted = replace_table(conn, schema, name, _TMP, new_types)
            else:
                # Two runs of one task at once (a worker that lost its lease and the one that
                # took it over) would both delete nothing and both insert: they take turns.
                lock_relation(conn, schema, f"{name}@{start}/{end}")
                if relation_kind(conn, schema, name) is None:
                    # The first tasks of a model race to create its table: one creates it, the
                    # others wait here and find it when it commits.
                    lock_relation(conn, schema, name)
                    if relation_kind(conn, schema, name) is None:
                        conn.execute(f"CREATE TABLE {target} AS SELECT * FROM {_TMP} LIMIT 0")
                old = [c.name for c in table_columns(conn, schema, name) or []]
                _check_columns(project, m.name, new_cols, old, schema)
                cols = ", ".join(quote(c) for c in new_cols)
                if m.strategy == "merge" and m.unique_key:
                    lock_relation(conn, schema, name)  # keys may cross periods: one at a time
                    deleted = merge(conn, target, _TMP, new_cols, m.unique_key)
                else:
                    if m.strategy == "replace":
                        deleted = conn.execute(f"DELETE FROM {target} WHERE {in_period}").rowcount
                    # append deletes nothing: running it twice doubles the period (the planner
                    # refuses append models unless allow_append).
                    conn.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {_TMP}")
            fp = fingerprint_where(conn, target, new_cols, in_period or "TRUE")
        return new_rows, max(deleted, 0), fp

    def drop_area(self, backfill_id: str) -> None:
        with self.connect() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {quote(audit_schema(backfill_id))} CASCADE")

    # -- inspecting -----------------------------------------------------------------------------
    def _source(
        self, conn: psycopg.Connection[Any], project: Project, model: str, area: Area, preview: bool
    ) -> tuple[str, list[TableColumn]] | None:
        """The relation (or query) holding ``model``'s rows in ``area`` and its columns; None
        when missing."""
        rel = self.relation(model, area)
        cols = table_columns(conn, *rel)
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
            return qualified(*rel), cols
        pub = self.published(model)
        pub_cols = {c.name for c in table_columns(conn, *pub) or []}
        names = [c.name for c in cols]
        if not pub_cols or not set(names) <= pub_cols:
            return qualified(*rel), cols
        # What publish leaves: a merge upserts on the key, so published rows of the periods
        # whose key the new run did not produce stay.
        listed = ", ".join(quote(n) for n in names)
        match = " AND ".join(f"n.{quote(k)} = p.{quote(k)}" for k in m.unique_key)
        return (
            f"(SELECT {listed} FROM {qualified(*rel)} UNION ALL SELECT {listed} FROM "
            f"{qualified(*pub)} p WHERE {in_periods(m.event_time, periods, 'p')} AND NOT "
            f"EXISTS (SELECT 1 FROM {qualified(*rel)} n WHERE {match}))"
        ), cols

    def _missing(self, model: str, area: Area) -> NotFoundError:
        where = "the published schema" if area.direct else "the area"
        return NotFoundError(
            f"{model} has no table in {where} {qualified(*self.relation(model, area))}"
        )

    def _where_periods(self, project: Project, model: str, periods: Sequence[Period] | None) -> str:
        if periods is None:
            return "TRUE"
        m = project_model(project, model)
        if not m.event_time:
            raise InvalidInputError(f"model {model!r} has no event_time to select periods by")
        return in_periods(m.event_time, periods, "t")

    def columns(self, project: Project, model: str, area: Area) -> list[Column] | None:
        with self.connect() as conn:
            cols = table_columns(conn, *self.relation(model, area))
        return None if cols is None else [Column(c.name, c.type, c.kind) for c in cols]

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
        with self.connect() as conn:
            found = self._source(conn, project, model, area, preview)
            if found is None:
                return {
                    label: PartitionFingerprint.empty()
                    for label in ([p[0] for p in parts] or ["all"])
                }
            rel, cols = found
            return fingerprint_parts(conn, rel, [c.name for c in cols], m.event_time, parts)

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
        with self.connect() as conn:
            found = self._source(conn, project, model, area, preview)
            if found is None:
                return dict.fromkeys(measures)
            # sum(numeric) is numeric (Decimal, exact); sum(bigint) is numeric too, made an int
            # again for integer columns; float columns sum to float8.
            kinds = {col.name: col.kind.value for col in found[1]}
            sums = ", ".join(f"sum(t.{quote(c)})" for c in measures)
            row = conn.execute(f"SELECT {sums} FROM {found[0]} t WHERE {where}").fetchone()
        return {
            c: (None if row is None else to_kind(row[i], kinds.get(c, value_kind(row[i]))))
            for i, c in enumerate(measures)
        }

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
        cols = ", ".join(f"t.{quote(c)}" for c in columns)
        nonnull = " AND ".join(f"t.{quote(c)} IS NOT NULL" for c in columns)
        with self.connect() as conn:
            found = self._source(conn, project, model, area, preview)
            if found is None:
                return True
            row = conn.execute(
                f"SELECT count(*), count(DISTINCT ROW({cols})), count(*) FILTER "
                f"(WHERE {nonnull}) FROM {found[0]} t WHERE {where}"
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
        if utc_column and not m.event_time:
            raise InvalidInputError(f"model {model!r} has no event_time")
        with self.connect() as conn:  # the catalog only; the rows travel through ADBC
            found = self._source(conn, project, model, area, preview)
        if found is None:
            raise self._missing(model, area)
        rel, cols = found
        select = select_list(cols, "t")
        if utc_column and m.event_time:
            select += f", CAST(t.{quote(m.event_time)} AS timestamptz) AS {quote(utc_column)}"
        with self.db.arrow_cursor() as cur:
            cur.execute(f"SELECT {select} FROM {rel} t WHERE {where}")
            yield to_arrow(cur.fetch_record_batch())

    # -- publishing -----------------------------------------------------------------------------
    def publish(self, project: Project, request: PublishRequest) -> None:
        _publish.publish(self, project, request)

    def changelog_rows(
        self,
        project: Project,
        backfill_id: str | None = None,
    ) -> list[tuple[Any, ...]]:
        return _publish.changelog_rows(self, backfill_id)


def _analyze_if_stale(conn: psycopg.Connection[Any], schema: str, name: str, written: int) -> None:
    """ANALYZE a table a task grew by more than a tenth (or never analyzed), after its commit.
    Without statistics the planner takes a fresh table for empty and joins the next model's
    inputs by nested loops (seconds instead of milliseconds); autovacuum comes too late for a
    backfill's next task. SKIP_LOCKED: a concurrent task already analyzing it is enough."""
    try:
        row = conn.execute(
            "SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = "
            "c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
            [schema, name],
        ).fetchone()
        if row is not None and (row[0] < 0 or written * 10 > row[0]):
            conn.execute(f"ANALYZE (SKIP_LOCKED) {qualified(schema, name)}")
    except psycopg.Error as exc:  # statistics are an optimisation: never fail the task
        log.debug("ANALYZE %s.%s skipped: %s", schema, name, exc)


def _tmp_columns(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """(name, type) of the task's temporary table, in order."""
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        f"'pg_temp.{_TMP}'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
    ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def _check_columns(
    project: Project, model: str, new: Sequence[str], old: Sequence[str], schema: str
) -> None:
    if set(new) != set(old):
        raise TaskFailure(
            f"{model_location(project, model)}: the SELECT's columns ({', '.join(new)}) differ from the "
            f"table's ({', '.join(old)}) in schema {schema!r}; a partition task cannot change "
            "the schema: rebuild the model (strategy full) or backfill it into an audit area",
            transient=False,
        )
