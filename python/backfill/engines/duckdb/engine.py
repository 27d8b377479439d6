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
leaves an uncommitted transaction that DuckDB discards on next open. Write-write conflicts
between this process's transactions are retried inside the task (``conflict_retries``).

Everything else is the engine core's (:mod:`backfill.engines.sql.core`); DuckDB binds a SELECT
without running it (the core's direct ``replace`` write) and scans fingerprints in integer
buckets, summing the audit's exact measures in the same pass (:mod:`.sql`). Publish is one
DuckDB transaction for every model and the changelog rows (``atomic_publish``): readers use
snapshot isolation and see all old or all new.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ...fingerprints import PartitionFingerprint
from ...model.files import EngineSettings
from ..base import Capabilities, Column, ColumnKind, TaskFailure
from ..sql import AuditScope, Rel, SqlEngine
from .connection import SharedDatabase
from .sql import DIALECT, fingerprint_parts_sums
from .turns import Turns

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Model, Project

__all__ = ["DuckDBEngine"]

# Errors of the model's SQL: the same every time.
_PERMANENT = (
    duckdb.ParserException,
    duckdb.BinderException,
    duckdb.CatalogException,
    duckdb.ConversionException,
    duckdb.InvalidInputException,
    duckdb.ConstraintException,
)
_EXACT = (ColumnKind.INTEGER, ColumnKind.DECIMAL)
_VIEW_SQL = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+.+?\s+AS\s+(.*?)\s*;?\s*$", re.I | re.S
)


class DuckDBEngine(SqlEngine):
    """DuckDB warehouse at ``path``; published models in ``schema``.

    ``keep_open=True`` holds the file for the engine's lifetime (faster for one process; other
    processes then wait); otherwise it is closed ``linger`` seconds after the last task ends.
    ``conflict_retries`` bounds retries of write-write conflicts between concurrent transactions
    of this process. ``naming`` gives the published (schema, name) of a model (default
    ``(schema, model)``; a dbt project names them after its manifest).
    """

    name = "duckdb"
    dialect = DIALECT
    capabilities = Capabilities(
        atomic_publish=True, embedded=True, landing=True, interrupt=True, shared_cores=True
    )

    def __init__(
        self,
        path: str | Path,
        *,
        schema: str = "main",
        lock_timeout: float = 120.0,
        keep_open: bool = False,
        linger: float = 0.05,
        conflict_retries: int = 30,
        naming: Callable[[Project | None, str], Rel] | None = None,
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.schema = schema
        self.conflict_retries = conflict_retries
        self.naming = naming
        self.db: SharedDatabase = SharedDatabase(self.path, lock_timeout, keep_open, linger)
        in_memory = str(path) in ("", ":memory:")
        self._turns = Turns(f":memory:{id(self)}" if in_memory else str(self.path.resolve()))

    @classmethod
    def table_source(cls, location: str, database: str, rel: tuple[str, str] | None) -> Any:
        """The table ``rel`` of the DuckDB file ``database``, or (``rel`` None) the Parquet
        files ``database`` names, read in one snapshot (``backfill.diff_tables``)."""
        from .tables import DuckDBTable

        if rel is None:
            return DuckDBTable(location, None, None, database)
        return DuckDBTable(location, database, rel, None)

    def _open_table(self, rel: Rel, location: str) -> Any:
        """The table ``rel`` of this engine's file, on a read-only connection of its own."""
        from .tables import DuckDBTable

        return DuckDBTable(location, str(self.path), rel, None)

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> DuckDBEngine:
        """The engine ``engine: {type: duckdb, ...}`` of backfill.yml names."""
        return cls(settings.path, schema=settings.schema, **dict(settings.options))

    def __repr__(self) -> str:
        return f"DuckDBEngine({str(self.path)!r}, schema={self.schema!r})"

    # -- the core's hooks ------------------------------------------------------------------------
    def _columns(self, cur: Any, rel: Rel) -> list[Column] | None:
        rows = cur.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = ? AND "
            "table_name = ? AND database_name = current_database() ORDER BY column_index",
            list(rel),
        ).fetchall()
        return [Column(str(n), str(t), DIALECT.kind_of(str(t))) for n, t in rows] or None

    def _kind(self, cur: Any, rel: Rel) -> str | None:
        row = cur.execute(
            "SELECT kind FROM (SELECT 'table' AS kind, schema_name, table_name AS name, "
            "database_name FROM duckdb_tables() UNION ALL SELECT 'view', schema_name, view_name, "
            "database_name FROM duckdb_views() WHERE NOT internal) WHERE schema_name = ? AND "
            "name = ? AND database_name = current_database()",
            list(rel),
        ).fetchone()
        return str(row[0]) if row else None

    def _count(self, cur: Any, sql: str) -> int:
        return self._one(cur, sql)  # DuckDB returns the count as a row (its rowcount is -1)

    @contextlib.contextmanager
    def _arrow(self, sql: str) -> Iterator[Any]:
        # DuckDB streams one result per connection: each stream gets its own cursor, with the
        # session's time zone set as in the engine.
        with self.connect() as cur:
            other = cur.cursor()
            try:
                other.execute("SET TimeZone = 'UTC'")
                yield other.sql(sql)
            finally:
                other.close()

    def _warehouse_errors(self) -> tuple[type[Exception], ...]:
        return (duckdb.Error,)

    def _failure(self, where: str, exc: Exception) -> tuple[TaskFailure, bool] | None:
        if not isinstance(exc, duckdb.Error):
            return None
        if "No space left on device" in str(exc):
            # Permanent for this run: retries within seconds would fail the same way, and each
            # would grow nothing but the log. The transaction rolled back: nothing was written.
            return TaskFailure(
                f"{where}: the disk holding {self.path} is full (No space left on device) while "
                "writing; nothing of this task was committed. Free space on that disk (or move "
                "the warehouse), then resume the backfill (backfill run --resume ID). DuckDB "
                f"said: {exc}",
                transient=False,
            ), False
        if isinstance(exc, duckdb.TransactionException):
            return TaskFailure(f"{where}: write conflict: {exc}", transient=True), True
        if isinstance(exc, _PERMANENT):
            return TaskFailure(f"{where}: SQL error: {exc}", transient=False), False
        return TaskFailure(f"{where}: {type(exc).__name__}: {exc}", transient=True), False

    def _stage(self, cur: Any, sql: str) -> tuple[str, list[Column]]:
        tmp = DIALECT.quote(self._tmp())
        cur.execute(f"CREATE TEMP TABLE {tmp} AS {sql}")
        desc = cur.execute(f"DESCRIBE {tmp}").fetchall()
        return tmp, [Column(str(r[0]), str(r[1]), DIALECT.kind_of(str(r[1]))) for r in desc]

    def _unstage(self, cur: Any, staged: str) -> None:
        cur.execute(f"DROP TABLE {staged}")

    def _stage_rows(self, cur: Any, rows: Any) -> str:
        # The cursor's own registration: other threads' cursors never see it.
        name = self._tmp("_landed")
        cur.register(name, rows)
        try:
            return self._stage(cur, f"SELECT * FROM {DIALECT.quote(name)}")[0]
        finally:
            cur.unregister(name)

    def _replace_table(self, cur: Any, rel: Rel, source: str, columns: Sequence[Column]) -> int:
        cur.execute(f"CREATE OR REPLACE TABLE {DIALECT.qualified(rel)} AS SELECT * FROM {source}")
        return 0

    def _view_sql(self, cur: Any, rel: Rel) -> str | None:
        row = cur.execute(
            "SELECT sql FROM duckdb_views() WHERE schema_name = ? AND view_name = ? AND "
            "database_name = current_database()",
            list(rel),
        ).fetchone()
        # DuckDB keeps the whole statement: CREATE VIEW <name> [(columns)] AS <select>;
        found = _VIEW_SQL.match(str(row[0])) if row else None
        return found.group(1) if found else None

    def _union(self, new: str, new_cols: list[str], outside: str, pub_cols: list[Column]) -> str:
        return f"(SELECT * FROM {new} UNION ALL BY NAME SELECT * {outside})"

    def _lock(self, cur: Any, rel: Rel, key: str = "") -> None:
        # Optimistic conflicts do not cover two writes of one empty period (see .turns). After
        # a wait the transaction starts again, as after a write conflict: its snapshot is from
        # before the other write committed.
        name = f"{rel[0]}.{rel[1]}" + (f"@{key}" if key else "")
        if self._turns.take(name):
            raise duckdb.TransactionException(
                f"waited for another write of {name}: starting again to see what it committed"
            )

    @contextlib.contextmanager
    def _transaction(self, cur: Any) -> Iterator[Any]:
        with self._turns.held_until_done(), super()._transaction(cur) as inside:
            yield inside

    def _bind(self, cur: Any, sql: str) -> list[str] | None:
        # Bound as a relation, never run: a statement that failed would abort the transaction.
        return [str(c) for c in cur.sql(f"SELECT * FROM (\n{sql}\n)").columns]

    def _scoped_fingerprints(
        self, cur: Any, scope: AuditScope, rel: str, cols: list[Column], m: Model
    ) -> dict[str, PartitionFingerprint]:
        """The partitions' fingerprints of ``rel``, keeping its exact measures' sums (a float's
        would round differently from one sum over the rows) as the scope's answers."""
        kinds = {c.name: c.kind for c in cols}
        exact = [c for c in scope.measures if kinds.get(c) in _EXACT]
        if not exact or not m.event_time:
            return super()._scoped_fingerprints(cur, scope, rel, cols, m)
        fps, totals = fingerprint_parts_sums(cur, rel, m.event_time, scope.parts, cols, exact)
        periods = [(s, e) for _, s, e in scope.parts]
        where = DIALECT.in_periods(m.event_time, periods, kinds.get(m.event_time), "t")
        for c, total in zip(exact, totals, strict=True):
            scope.answers[("sum", rel, where, c)] = (total,)
        return fps

    def changelog_rows(
        self, project: Project, backfill_id: str | None = None
    ) -> list[tuple[Any, ...]]:
        rows = super().changelog_rows(project, backfill_id)
        self.close()
        return rows
