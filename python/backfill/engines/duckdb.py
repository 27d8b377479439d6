"""The DuckDB engine: a database file (default ``warehouse.duckdb`` in the project).

Published models live in one schema (``main``); backfill ``bf_...`` writes into the schema
``audit_bf_...``. Inside an audit area ``ref("m")`` to a model the backfill rebuilds reads

    (SELECT * FROM audit.m UNION ALL BY NAME
     SELECT * FROM main.m WHERE NOT (event_time in the backfilled periods))

so a rolling model on 1 Aug reads 26-31 Jul from published data and 1 Aug from the audit area,
with filters pushed into both sides: cost follows the backfilled periods, never a table copy.

One writer process per file. DuckDB lets one process open a database file for writing at a time
(threads of that process share it, with optimistic concurrency between their transactions).
So the engine holds the file only while a task runs: the first running task of a process opens
it, the last one closes it, and another process (a second runner on the same ledger) waiting for
the lock retries with backoff for up to ``lock_timeout`` seconds. Runners on one file therefore
take turns; for real parallelism across processes use one process with ``concurrency`` threads.
A reader holding the file open (a notebook, a BI tool) blocks writers the same way: the task
waits up to ``lock_timeout``, then fails as transient and is retried with backoff.
A process killed mid-task leaves an uncommitted transaction that DuckDB discards on next open.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import random
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from .._arrow import ArrowTable
from ..errors import InvalidInputError, NotFoundError
from ..project_files import render, sql_literal
from .base import Area, Engine, PartitionFingerprint, TaskFailure, WriteResult

if TYPE_CHECKING:  # pragma: no cover
    from ..project import Model, Project

log = logging.getLogger(__name__)

__all__ = ["DuckDBEngine", "audit_schema", "quote"]

_U64 = 1 << 64


def quote(name: str) -> str:
    """A DuckDB quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def audit_schema(backfill_id: str) -> str:
    return f"audit_{backfill_id}"


def relation_kind(cur: duckdb.DuckDBPyConnection, relation: str) -> str | None:
    """``"table"``, ``"view"`` or None for ``"schema"."name"`` (a catalog lookup: safe inside a
    transaction, where a failed SELECT would abort it)."""
    names = [n.replace('""', '"') for n in re.findall(r'"((?:[^"]|"")*)"', relation)]
    if len(names) != 2:
        raise InvalidInputError(f"expected a quoted \"schema\".\"table\", got {relation!r}")
    row = cur.execute(
        "SELECT kind FROM (SELECT 'table' AS kind, schema_name, table_name AS name, database_name "
        "FROM duckdb_tables() UNION ALL SELECT 'view', schema_name, view_name, database_name "
        "FROM duckdb_views() WHERE NOT internal) WHERE schema_name = ? AND name = ? "
        "AND database_name = current_database()", names).fetchone()
    return str(row[0]) if row else None


def relation_exists(cur: duckdb.DuckDBPyConnection, relation: str) -> bool:
    return relation_kind(cur, relation) is not None


@contextlib.contextmanager
def transaction(cur: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT on ``cur``; ROLLBACK when the block raises (then re-raises)."""
    cur.execute("BEGIN TRANSACTION")
    try:
        yield cur
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            cur.execute("ROLLBACK")
        raise
    cur.execute("COMMIT")


def _merge(periods: Sequence[tuple[dt.datetime, dt.datetime]]) -> list[tuple[dt.datetime, dt.datetime]]:
    out: list[tuple[dt.datetime, dt.datetime]] = []
    for s, e in sorted(periods):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _in_periods(column: str, periods: Sequence[tuple[dt.datetime, dt.datetime]]) -> str:
    col = quote(column)
    terms = [f"({col} >= {sql_literal(s)} AND {col} < {sql_literal(e)})" for s, e in _merge(periods)]
    return "(" + " OR ".join(terms) + ")" if terms else "FALSE"


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("Could not set lock" in text or "Conflicting lock" in text)


class _SharedDatabase:
    """One process-wide handle on the file, opened by the first user and closed by the last."""

    def __init__(self, path: Path, lock_timeout: float, keep_open: bool, linger: float) -> None:
        self.path = path
        self.lock_timeout = lock_timeout
        self.keep_open = keep_open
        self.linger = linger
        self._mutex = threading.Lock()
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._users = 0
        self._released = 0  # bumps on every release; a pending close checks it is still current

    def _open(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.01
        warned = False
        while True:
            try:
                conn = duckdb.connect(str(self.path))
                conn.execute("SET TimeZone = 'UTC'")
                return conn
            except duckdb.IOException as exc:
                if not _is_lock_error(exc) or time.monotonic() > deadline:
                    if _is_lock_error(exc):
                        raise TaskFailure(f"{self.path} stayed locked by another process for "
                                          f"{self.lock_timeout:.0f} s: {exc}", transient=True) from None
                    raise
                if not warned and time.monotonic() > deadline - self.lock_timeout + 2.0:
                    log.warning("waiting up to %.0f s for %s, held by another process: %s",
                                self.lock_timeout, self.path, exc)
                    warned = True
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)

    @contextlib.contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._mutex:
            if self._conn is None:
                self._conn = self._open()
            self._users += 1
            cur = self._conn.cursor()
        try:
            yield cur
        finally:
            cur.close()
            with self._mutex:
                self._users -= 1
                self._released += 1
                if self._users == 0 and not self.keep_open and self._conn is not None:
                    # Linger briefly: the runner's next task usually follows within
                    # milliseconds; another process waits at most `linger` longer.
                    timer = threading.Timer(self.linger, self._close_if_idle, (self._released,))
                    timer.daemon = True
                    timer.start()

    def _close_if_idle(self, released: int) -> None:
        with self._mutex:
            if self._users == 0 and self._released == released and self._conn is not None:
                self._conn.close()
                self._conn = None

    def close(self) -> None:
        with self._mutex:
            self._released += 1
            if self._conn is not None and self._users == 0:
                self._conn.close()
                self._conn = None


class DuckDBEngine(Engine):
    """DuckDB warehouse at ``path``; published models in ``schema``.

    ``keep_open=True`` holds the file for the engine's lifetime (faster for one process; other
    processes then wait); otherwise it is closed ``linger`` seconds after the last task ends. ``conflict_retries`` bounds retries of write-write conflicts between
    concurrent transactions of this process.
    """

    name = "duckdb"

    def __init__(self, path: str | Path, *, schema: str = "main", lock_timeout: float = 120.0,
                 keep_open: bool = False, linger: float = 0.05,
                 conflict_retries: int = 30) -> None:
        self.path = Path(path)
        self.schema = schema
        self.conflict_retries = conflict_retries
        self._db = _SharedDatabase(self.path, lock_timeout, keep_open, linger)
        self._tmp_counter = 0
        self._tmp_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DuckDBEngine({str(self.path)!r}, schema={self.schema!r})"

    @contextlib.contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on the warehouse (the file is held until the block ends)."""
        with self._db.cursor() as cur:
            yield cur

    def close(self) -> None:
        self._db.close()

    # -- naming and rendering ------------------------------------------------------------------
    def relation(self, model: str, area: Area) -> str:
        schema = self.schema if area.direct else audit_schema(str(area.backfill_id))
        return f"{quote(schema)}.{quote(model)}"

    def published(self, model: str) -> str:
        return f"{quote(self.schema)}.{quote(model)}"

    def _exists(self, cur: duckdb.DuckDBPyConnection, schema: str, table: str) -> bool:
        row = cur.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = ? "
            "AND database_name = current_database()", [schema, table]).fetchone()
        return bool(row and row[0])

    def _ref(self, project: Project, area: Area, cur: duckdb.DuckDBPyConnection | None,
             name: str) -> str:
        """What a read of ``name`` sees in ``area``: the backfill's new rows for its periods and
        the published rows elsewhere (the new table alone for full rebuilds)."""
        published = self.published(name)
        if area.direct or name not in area.periods:
            return published
        model = project.models[name]
        audit = self.relation(name, area)
        has_published = cur is None or self._exists(cur, self.schema, name)
        has_audit = cur is None or self._exists(cur, audit_schema(str(area.backfill_id)), name)
        if model.strategy in ("full", "view") or not model.event_time:
            return audit if has_audit or not has_published else published
        if not has_published:
            return audit
        keep = _in_periods(model.event_time, area.periods[name])
        outside = f"SELECT * FROM {published} WHERE NOT coalesce({keep}, FALSE)"
        if not has_audit:  # no new rows written yet
            return f"({outside})"
        return f"(SELECT * FROM {audit} UNION ALL BY NAME {outside})"

    def _render(self, project: Project, model: str, start: dt.datetime | None,
                end: dt.datetime | None, area: Area, cur: duckdb.DuckDBPyConnection | None) -> str:
        m = _model(project, model)
        where = _where(project, model)

        def ref(name: str, **_: object) -> str:
            if name not in project.models:
                raise NotFoundError(f"ref({name!r}) names no model")
            return self._ref(project, area, cur, name)

        def source(schema: str, table: str) -> str:
            return f"{quote(schema)}.{quote(table)}"

        return render(m.sql or "", start=start, end=end, ref=ref, source=source,
                      this=self._ref(project, area, cur, model) if not area.direct
                      else self.relation(model, area),
                      is_incremental=lambda: self._this_exists(area, cur, model), where=where)

    def _this_exists(self, area: Area, cur: duckdb.DuckDBPyConnection | None, model: str) -> bool:
        if cur is None:
            return True
        return self._exists(cur, self.schema, model) or (
            not area.direct and self._exists(cur, audit_schema(str(area.backfill_id)), model))

    def render(self, project: Project, model: str, start: dt.datetime | None,
               end: dt.datetime | None, area: Area) -> str:
        with self.connect() as cur:
            return self._render(project, model, start, end, area, cur)

    # -- writing ------------------------------------------------------------------------------
    def run_task(self, project: Project, model: str, start: dt.datetime | None,
                 end: dt.datetime | None, area: Area) -> WriteResult:
        m = _model(project, model)
        began = time.perf_counter()
        conflicts = 0
        delay = 0.005
        while True:
            try:
                with self.connect() as cur:
                    rows, deleted, fp = self._write(cur, project, m, start, end, area)
                return WriteResult(rows, deleted, fp, time.perf_counter() - began, conflicts)
            except duckdb.TransactionException as exc:
                conflicts += 1
                if conflicts > self.conflict_retries:
                    raise TaskFailure(f"{_where(project, model)}: gave up after {conflicts} "
                                      f"write conflicts: {exc}", transient=True) from None
                log.debug("%s: write conflict, retrying: %s", model, exc)
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)
            except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                    duckdb.ConversionException, duckdb.InvalidInputException,
                    duckdb.ConstraintException) as exc:
                raise TaskFailure(f"{_where(project, model)}: SQL error: {exc}",
                                  transient=False) from None
            except duckdb.Error as exc:
                raise TaskFailure(f"{_where(project, model)}: {type(exc).__name__}: {exc}",
                                  transient=True) from None

    def _tmp_name(self) -> str:
        with self._tmp_lock:
            self._tmp_counter += 1
            return f"__backfill_new_{self._tmp_counter}"

    def _write(self, cur: duckdb.DuckDBPyConnection, project: Project, m: Model,
               start: dt.datetime | None, end: dt.datetime | None,
               area: Area) -> tuple[int, int, str]:
        target = self.relation(m.name, area)
        schema = self.schema if area.direct else audit_schema(str(area.backfill_id))
        tmp = quote(self._tmp_name())
        # replace/merge/append write one period; full and view rebuild the whole relation.
        partitioned = start is not None and end is not None and \
            m.strategy in ("replace", "merge", "append")
        if m.strategy in ("replace", "merge", "append") and m.grain and not partitioned:
            raise TaskFailure(f"{_where(project, m.name)}: a {m.strategy} task needs a period",
                              transient=False)
        with transaction(cur):
            sql = self._render(project, m.name, start, end, area, cur)
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
            if m.strategy == "view":
                cur.execute(f"CREATE OR REPLACE VIEW {target} AS {sql}")
                fp = self._fingerprint_where(cur, target, "TRUE")
                return int(fp.split(":")[0]), 0, fp
            cur.execute(f"CREATE TEMP TABLE {tmp} AS {sql}")
            in_period = ""
            if partitioned:
                assert start is not None and end is not None and m.event_time
                in_period = _in_periods(m.event_time, [(start, end)])
                outside = _one(cur, f"SELECT count(*) FROM {tmp} WHERE NOT coalesce({in_period}, "
                                    "FALSE)")
                if outside:
                    raise TaskFailure(
                        f"{_where(project, m.name)}: the SELECT returned {outside} row(s) with "
                        f"{m.event_time} outside the task's period [{start:%Y-%m-%d %H:%M}, "
                        f"{end:%Y-%m-%d %H:%M}) UTC (or NULL); a task writes exactly its period: "
                        "filter the inputs with {{ start }} and {{ end }}", transient=False)
            new_rows = _one(cur, f"SELECT count(*) FROM {tmp}")
            deleted = 0
            if m.strategy == "full" or not partitioned:
                cur.execute(f"CREATE OR REPLACE TABLE {target} AS SELECT * FROM {tmp}")
            else:
                cur.execute(f"CREATE TABLE IF NOT EXISTS {target} AS SELECT * FROM {tmp} LIMIT 0")
                _check_columns(cur, project, m.name, tmp, schema)
                if m.strategy == "replace":
                    deleted = _one(cur, f"SELECT count(*) FROM {target} WHERE {in_period}")
                    cur.execute(f"DELETE FROM {target} WHERE {in_period}")
                elif m.strategy == "merge":  # upsert on the unique key
                    keys = ", ".join(quote(k) for k in m.unique_key)
                    deleted = _one(cur, f"SELECT count(*) FROM {target} WHERE ({keys}) IN "
                                        f"(SELECT ({keys}) FROM {tmp})")
                    cur.execute(f"DELETE FROM {target} WHERE ({keys}) IN (SELECT ({keys}) "
                                f"FROM {tmp})")
                # append deletes nothing: running it twice doubles the period (the planner
                # refuses append models unless allow_append).
                cur.execute(f"INSERT INTO {target} BY NAME SELECT * FROM {tmp}")
            fp = self._fingerprint_where(cur, target, in_period or "TRUE")
            cur.execute(f"DROP TABLE {tmp}")
        return new_rows, deleted, fp

    # -- fingerprints --------------------------------------------------------------------------
    @staticmethod
    def _row_hash(cur: duckdb.DuckDBPyConnection, relation: str, alias: str = "") -> str:
        names = [d[0] for d in cur.execute(f"SELECT * FROM {relation} LIMIT 0").description]
        # Sorted names: the digest does not depend on column order.
        prefix = f"{alias}." if alias else ""
        cols = ", ".join(f"{prefix}{quote(n)}" for n in sorted(names))
        return f"hash({cols})"

    def _fingerprint_where(self, cur: duckdb.DuckDBPyConnection, relation: str, where: str) -> str:
        h = self._row_hash(cur, relation)
        row = cur.execute(f"SELECT count(*), coalesce(sum({h}::HUGEINT), 0) % {_U64} "
                          f"FROM {relation} WHERE {where}").fetchone()
        assert row is not None
        return f"{int(row[0])}:{int(row[1]):016x}"

    def partition_fingerprints(self, project: Project, model: str, area: Area,
                               partitions: Sequence[tuple[str, dt.datetime, dt.datetime]],
                               ) -> list[PartitionFingerprint]:
        m = _model(project, model)
        if not m.event_time:
            raise InvalidInputError(f"model {model!r} has no event_time to partition by")
        schema = self.schema if area.direct else audit_schema(str(area.backfill_id))
        target = self.relation(model, area)
        with self.connect() as cur:
            if not self._exists(cur, schema, model) or not partitions:
                return [PartitionFingerprint(lab, 0, f"{0:016x}") for lab, _, _ in partitions]
            h = self._row_hash(cur, target, "t")
            values = ", ".join(f"({i}, {sql_literal(s)}, {sql_literal(e)})"
                               for i, (_, s, e) in enumerate(partitions))
            et = quote(m.event_time)
            rows = cur.execute(
                f"SELECT p.i, count(t.{et}), coalesce(sum({h}::HUGEINT) FILTER "
                f"(WHERE t.{et} IS NOT NULL), 0) % {_U64} "
                f"FROM (VALUES {values}) p(i, s, e) LEFT JOIN {target} t "
                f"ON t.{et} >= p.s AND t.{et} < p.e GROUP BY p.i").fetchall()
        by_index = {int(i): (int(n), int(d)) for i, n, d in rows}
        return [PartitionFingerprint(lab, by_index[i][0], f"{by_index[i][1]:016x}")
                for i, (lab, _, _) in enumerate(partitions)]

    def table_fingerprint(self, relation: str) -> str:
        """Fingerprint ("rows:digest") of a whole table, e.g. ``'"main"."fct_daily_sales"'``."""
        with self.connect() as cur:
            return self._fingerprint_where(cur, relation, "TRUE")

    def read(self, project: Project, model: str, area: Area,
             periods: Sequence[tuple[dt.datetime, dt.datetime]] | None = None) -> ArrowTable:
        m = _model(project, model)
        where = "TRUE"
        if periods is not None:
            if not m.event_time:
                raise InvalidInputError(f"model {model!r} has no event_time to select periods by")
            where = _in_periods(m.event_time, periods)
        with self.connect() as cur:
            # Copied into an owned Arrow table (C++) while the file is held: no pyarrow needed.
            return ArrowTable.from_arrow(cur.sql(f"SELECT * FROM {self.relation(model, area)} "
                                                 f"WHERE {where}"))

    def drop_area(self, backfill_id: str) -> None:
        with self.connect() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {quote(audit_schema(backfill_id))} CASCADE")


def _one(cur: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = cur.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _model(project: Project, model: str) -> Model:
    try:
        return project.models[model]
    except KeyError:
        raise NotFoundError(f"no model {model!r} in project {project.name!r}") from None


def _where(project: Project, model: str) -> str:
    settings = project.settings
    if settings is not None and model in settings.files:
        return f"{settings.files[model]} (model {model!r})"
    return f"model {model!r}"


def _check_columns(cur: duckdb.DuckDBPyConnection, project: Project, model: str, tmp: str,
                   schema: str) -> None:
    new = [d[0] for d in cur.execute(f"SELECT * FROM {tmp} LIMIT 0").description]
    old = [r[0] for r in cur.execute(
        "SELECT column_name FROM duckdb_columns() WHERE schema_name = ? AND table_name = ? "
        "AND database_name = current_database() ORDER BY column_index", [schema, model]).fetchall()]
    if set(new) != set(old):
        raise TaskFailure(
            f"{_where(project, model)}: the SELECT's columns ({', '.join(new)}) differ from the "
            f"table's ({', '.join(old)}) in schema {schema!r}; a partition task cannot change "
            "the schema: rebuild the model (strategy full) or backfill it into an audit area",
            transient=False)
