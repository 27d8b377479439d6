"""The PostgreSQL engine: ``engine: {type: postgres, url: postgresql://..., schema: public}``.

Published models live in ``schema``; backfill ``bf_...`` writes into the schema
``audit_bf_...``. Inside an audit area ``ref("m")`` to a model the backfill rebuilds reads

    (SELECT a, b, ... FROM audit.m UNION ALL
     SELECT a, b, ... FROM public.m WHERE NOT (event_time in the backfilled periods))

with the columns selected by name from the catalog (Postgres has no ``UNION ALL BY NAME``).
Postgres 15 wants an alias after a subquery in FROM: write ``{{ ref("m") }} m``.

A task is one transaction on a pooled connection (the engine core's write, :mod:`backfill.engines
.sql.core`): the SELECT goes into a temporary table, rows outside the period fail the task, then
``replace`` deletes the period and inserts, ``merge`` runs ``MERGE`` on the unique key, ``full``
replaces the table's rows (or the table when its columns change), ``view`` re-creates the view.
Concurrent tasks of one model are safe: replace tasks touch disjoint periods; the first creation
of a table, merges (whose keys may cross periods) and full rebuilds take a transaction-scoped
advisory lock on the relation. Serialization failures and deadlocks are retried in the task;
lock timeouts and lost connections are transient; SQL errors are not. After a task commits, the
table it wrote is analyzed when the planner would misjudge its rows (the engine core's
``_fresh_statistics``), before any later task reads them.

Rows travel to the C++ diff as Arrow batches through ADBC (see :mod:`.arrow`). Publish is ONE
transaction for every model and the changelog, under a per-schema advisory lock and ``SHARE ROW
EXCLUSIVE`` locks on the published tables (in name order: two publishes cannot deadlock; readers
are not blocked): a concurrent reader sees all old or all new.

A model with ``table_partitions`` has a declaratively partitioned table (the engine core's
:mod:`~backfill.engines.sql.partitions`); this engine reads its partitions' bounds from the
catalog (``_table_partitions``) and takes the ACCESS EXCLUSIVE locks its publish's partition
exchanges need (``_lock_exclusive``): readers of those tables wait from then to the commit.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import PoolTimeout

from ...errors import ConflictError, InvalidInputError
from ...model.files import EngineSettings
from ..base import Capabilities, Column, TaskFailure
from ..sql import Rel, SqlEngine
from ..sql.partitions import Found
from .arrow import to_arrow
from .connection import Database, PostgresConnectionError, mask_url, task_failure
from .sql import DIALECT

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project

__all__ = ["PostgresEngine"]

_CONFLICTS = ("40001", "40P01")  # serialization failure, deadlock: retried inside the task


class PostgresEngine(SqlEngine):
    """PostgreSQL warehouse at ``url``; published models in ``schema``.

    ``pool_size`` bounds the pooled connections (at least the run's concurrency);
    ``connect_timeout`` is in seconds; ``conflict_retries`` bounds in-task retries of
    serialization failures and deadlocks. With ``check`` (default) the constructor connects
    once and verifies the permissions the engine needs, so a bad URL, password or grant fails
    before anything is written. ``naming`` gives the published (schema, name) of a model
    (default ``(schema, model)``; a dbt project names them after its manifest).
    """

    name = "postgres"
    dialect = DIALECT
    capabilities = Capabilities(
        atomic_publish=True, embedded=False, landing=True, interrupt=True, table_partitions=True
    )

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        pool_size: int = 8,
        connect_timeout: float = 10.0,
        conflict_retries: int = 5,
        check: bool = True,
        naming: Callable[[Project | None, str], Rel] | None = None,
    ) -> None:
        super().__init__()
        self.schema = schema
        self.naming = naming
        self.conflict_retries = conflict_retries
        self.db: Database = Database(url, pool_size=pool_size, connect_timeout=connect_timeout)
        if check:
            self.db.check(schema)

    @classmethod
    def table_source(cls, location: str, database: str, rel: tuple[str, str] | None) -> Any:
        """The table ``rel`` of the database at URL ``database``, read in one snapshot
        (``backfill.diff_tables``)."""
        from .tables import PostgresTable

        if rel is None:
            raise InvalidInputError(f"{location}: expected postgresql://...#schema.table")
        return PostgresTable(location, database, rel)

    def _open_table(self, rel: Rel, location: str) -> Any:
        """The table ``rel`` of this engine's database, in a transaction of its own."""
        from .tables import PostgresTable

        return PostgresTable(location, self.db.url, rel)

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

    # -- the core's hooks ------------------------------------------------------------------------
    def _columns(self, cur: Any, rel: Rel) -> list[Column] | None:
        return self._columns_of(cur, DIALECT.qualified(rel))

    def _columns_of(self, conn: Any, regclass: str) -> list[Column] | None:
        rows = conn.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typname, t.typcategory "
            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = "
            "to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            [regclass],
        ).fetchall()
        if not rows:
            found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [regclass]).fetchone()
            return [] if found and found[0] else None
        return [
            Column(str(n), str(t), DIALECT.kind_of("_" if cat == "A" else str(tn)))
            for n, t, tn, cat in rows
        ]

    def _kind(self, cur: Any, rel: Rel) -> str | None:
        row = cur.execute(
            "SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p', 'v', 'm')",
            list(rel),
        ).fetchone()
        return None if row is None else "view" if row[0] in ("v", "m") else "table"

    def _transaction(self, cur: Any) -> contextlib.AbstractContextManager[Any]:
        return cur.transaction()  # type: ignore[no-any-return]

    def _table_partitions(self, cur: Any, rel: Rel, column: Column) -> Found | None:
        target = DIALECT.qualified(rel)
        key = cur.execute(
            "SELECT p.partstrat, a.attname FROM pg_partitioned_table p JOIN pg_attribute a "
            "ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0] "
            "WHERE p.partrelid = to_regclass(%s) AND p.partnatts = 1",
            [target],
        ).fetchone()
        if key is None or key[0] != "r" or key[1] != column.name:
            return None  # not partitioned, or not by range of this one column
        # Each partition's bounds as the column's values (a DEFAULT partition, MINVALUE or
        # MAXVALUE bounds match nothing: never exchanged).
        rows = cur.execute(
            f"SELECT c.relname, CAST(b[1] AS {column.type}), CAST(b[2] AS {column.type}) "
            "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid, "
            "regexp_match(pg_get_expr(c.relpartbound, c.oid), "
            "'^FOR VALUES FROM \\(''([^'']*)''\\) TO \\(''([^'']*)''\\)$') b "
            "WHERE i.inhparent = to_regclass(%s) AND b IS NOT NULL",
            [target],
        ).fetchall()
        return {(low, high): str(name) for name, low, high in rows}

    def _tables_of(self, cur: Any, schema: str) -> list[str]:
        # A partitioned table counts its partitions' rows: partitions are not listed apart.
        rows = cur.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition",
            [schema],
        ).fetchall()
        return [str(r[0]) for r in rows]

    @contextlib.contextmanager
    def _arrow(self, sql: str) -> Iterator[Any]:
        with self.db.arrow_cursor() as cur:
            cur.execute(sql)
            yield to_arrow(cur.fetch_record_batch())

    def _warehouse_errors(self) -> tuple[type[Exception], ...]:
        return (PostgresConnectionError, psycopg.Error, PoolTimeout)

    def _failure(self, where: str, exc: Exception) -> tuple[TaskFailure, bool] | None:
        if isinstance(exc, PostgresConnectionError):
            return TaskFailure(f"{where}: {exc}", transient=True), False
        if not isinstance(exc, (psycopg.Error, PoolTimeout)):
            return None
        return task_failure(where, exc), getattr(exc, "sqlstate", None) in _CONFLICTS

    def _ensure_schema(self, cur: Any, schema: str) -> None:
        """Creates ``schema`` if missing, in its own transaction: concurrent first tasks would
        otherwise race on CREATE SCHEMA IF NOT EXISTS (a unique violation in the catalog)."""
        if cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone():
            return
        with cur.transaction():
            self._lock(cur, (schema, ""))
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {DIALECT.quote(schema)}")

    def _lock(self, cur: Any, rel: Rel, key: str = "") -> None:
        name = f"{rel[0]}.{rel[1]}" + (f"@{key}" if key else "")
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"backfill:{name}"])

    def _bind(self, cur: Any, sql: str) -> list[str] | None:
        # Planned, not run (a LIMIT 0 ends the executor before the first row), in a savepoint:
        # a SELECT that does not bind leaves the task's transaction to the general path, which
        # reports the error. Writing straight from the SELECT spares the copy through a
        # temporary table and its two counts: a third of the shop's build at 4,000 orders a day.
        try:
            with cur.transaction():
                found = cur.execute(f"SELECT * FROM (\n{sql}\n) q LIMIT 0").description
        except psycopg.Error:
            return None
        return [str(c.name) for c in found or []]

    def _stage(self, cur: Any, sql: str) -> tuple[str, list[Column]]:
        tmp = DIALECT.quote(self._tmp())
        cur.execute(f"CREATE TEMP TABLE {tmp} ON COMMIT DROP AS {sql}")
        return tmp, self._columns_of(cur, f"pg_temp.{tmp}") or []

    def _stage_rows(self, cur: Any, rows: Any) -> str:
        tmp = DIALECT.quote(self._tmp("_landed"))
        types = [f"{DIALECT.quote(f.name)} {DIALECT.arrow_type(f)}" for f in rows.schema]
        cur.execute(f"CREATE TEMP TABLE {tmp} ({', '.join(types)}) ON COMMIT DROP")
        names = ", ".join(DIALECT.quote(n) for n in rows.schema.names)
        with cur.cursor() as c, c.copy(f"COPY {tmp} ({names}) FROM STDIN") as copy:
            for row in rows.to_pylist():
                copy.write_row(tuple(row.values()))
        return tmp

    def _replace_view(self, cur: Any, rel: Rel, sql: str) -> None:
        target = DIALECT.qualified(rel)
        kind = self._kind(cur, rel)
        if kind == "table":  # the model was a table, is now a view
            cur.execute(f"DROP TABLE {target}")
        elif kind == "view":
            try:  # keeps views that depend on this one; fails when its columns change
                with cur.transaction():
                    cur.execute(f"CREATE OR REPLACE VIEW {target} AS {sql}")
                return
            except psycopg.errors.InvalidTableDefinition:
                cur.execute(f"DROP VIEW {target}")
        cur.execute(f"CREATE VIEW {target} AS {sql}")

    def _view_sql(self, cur: Any, rel: Rel) -> str | None:
        row = cur.execute(
            "SELECT pg_get_viewdef(to_regclass(%s))", [DIALECT.qualified(rel)]
        ).fetchone()
        return None if row is None or row[0] is None else str(row[0]).rstrip().rstrip(";")

    def _estimated_rows(self, cur: Any, select: str) -> float | None:
        # The planner's row estimate of the top plan node; planning only, nothing runs.
        row = cur.execute(f"EXPLAIN (FORMAT JSON) {select}").fetchone()
        return None if row is None else float(row[0][0]["Plan"]["Plan Rows"])

    def _lock_publish(self, cur: Any, rels: Sequence[Rel]) -> None:
        self._lock(cur, (self.schema, "backfill publish"))
        tables = sorted({r for r in rels if self._kind(cur, r) == "table"})
        if tables:
            listed = ", ".join(DIALECT.qualified(t) for t in tables)
            cur.execute(f"LOCK TABLE {listed} IN SHARE ROW EXCLUSIVE MODE")

    #: how long a publish keeps trying to lock several partitioned tables at once before it
    #: gives up (readers kept them busy), seconds
    exchange_lock_patience: float = 120.0

    def _lock_exclusive(self, cur: Any, tables: Sequence[Rel]) -> None:
        """Locks the partitioned tables whose partitions a publish exchanges (ACCESS EXCLUSIVE:
        DETACH wants it), all at once, before the first DETACH.

        One table: wait for the queries reading it (new readers queue behind the lock). Several:
        a reader of two of them that holds one and waits for the other, while the publish holds
        the other and waits for the one, is a deadlock that PostgreSQL breaks by aborting the
        side whose ``deadlock_timeout`` runs out first, which may be the publish. So each try
        waits at most 0.8 x ``deadlock_timeout`` (then the reader's check finds the cycle and
        aborts the reader, or the publish gives up first): on a timeout the publish lets go
        of the locks of the try (a savepoint) and tries again, for up to
        ``exchange_lock_patience`` seconds."""
        listed = ", ".join(DIALECT.qualified(t) for t in tables)
        lock = f"LOCK TABLE {listed} IN ACCESS EXCLUSIVE MODE"
        if len(tables) == 1:
            cur.execute(lock)
            return
        row = cur.execute(
            "SELECT setting::float FROM pg_settings WHERE name = 'deadlock_timeout'"
        ).fetchone()
        wait_ms = max(10, int(0.8 * float(row[0] if row else 1000.0)))
        began = time.monotonic()
        delay = 0.01
        while True:
            try:
                with cur.transaction():  # a savepoint: a timeout lets go of this try's locks
                    cur.execute(f"SET LOCAL lock_timeout = {wait_ms}")
                    cur.execute(lock)
                    cur.execute("SET LOCAL lock_timeout TO DEFAULT")
                return
            except psycopg.errors.LockNotAvailable:
                if time.monotonic() - began > self.exchange_lock_patience:
                    raise ConflictError(
                        f"publish could not lock {listed} for its partition exchanges within "
                        f"{self.exchange_lock_patience:.0f} s: queries kept reading them; "
                        "nothing was published, try again"
                    ) from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)

    def _cursor(self, cur: Any) -> contextlib.AbstractContextManager[Any]:
        return cur.cursor()  # type: ignore[no-any-return]  # a pooled connection's cursor
