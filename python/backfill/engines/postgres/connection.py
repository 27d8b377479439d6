"""Connections to a PostgreSQL warehouse: a psycopg pool for SQL (the pools, masked driver
errors and which errors are worth a retry are :mod:`backfill._postgres`'s, shared with the
Postgres ledger) and a few ADBC connections for Arrow streams.

Every connection runs with ``TimeZone=UTC`` and ``DateStyle=ISO`` (the period filters are UTC
timestamp literals, and fingerprints hash the rows' text form, which must not depend on the
session) and in autocommit mode: a transaction is always an explicit ``conn.transaction()``, so
an idle pooled connection never holds a snapshot or a lock that would block a publish.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from ..._postgres import Pool, PoolSpec, is_transient, open_pool, reason
from ..._secrets import mask_text, mask_url
from ...errors import InvalidInputError
from ..base import TaskFailure
from ..sql.connection import InUse

log = logging.getLogger(__name__)

__all__ = ["Database", "PostgresConnectionError", "is_transient", "mask_url", "task_failure"]

_SESSION = "SET TimeZone TO 'UTC'; SET DateStyle TO 'ISO, YMD'; SET IntervalStyle TO 'iso_8601'"


class PostgresConnectionError(InvalidInputError):
    """The warehouse named by a URL cannot be used (unreachable, refused, no permission)."""


def task_failure(where: str, exc: BaseException) -> TaskFailure:
    """The :class:`TaskFailure` of a database error in a task of ``where``."""
    transient = is_transient(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = mask_text(text)  # a driver's message may quote a connection string
    kind = "SQL error" if not transient else type(exc).__name__
    return TaskFailure(f"{where}: {kind}: {text}", transient=transient)


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.autocommit = True
    conn.execute(_SESSION)


class Database:
    """A PostgreSQL database at ``url``: a psycopg pool (opened on first use, re-opened after
    :meth:`close`) and a free list of ADBC connections for Arrow streams."""

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout: float = 10.0) -> None:
        self.url = url
        self.masked = mask_url(url)
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._pool: Pool | None = None
        self._adbc: list[Any] = []
        self._checked = False
        self._in_use: InUse[psycopg.Connection[Any]] = InUse()  # checked out (interrupt them)

    # -- checking ---------------------------------------------------------------------------
    def check(self, schema: str) -> None:
        """Connects once and checks what the engine needs: it may create schemas (audit areas)
        and use and create in ``schema``. Raises :class:`PostgresConnectionError` naming the URL
        (password masked) and what failed; writes nothing."""
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
            ) as conn:
                row = conn.execute(
                    "SELECT current_user, current_database(), "
                    "has_database_privilege(current_database(), 'CREATE'), "
                    "(SELECT oid FROM pg_namespace WHERE nspname = %s), "
                    "current_setting('server_version_num')::int",
                    [schema],
                ).fetchone()
                assert row is not None
                user, database, can_create, schema_oid, version = row
                usable = True
                if schema_oid is not None:
                    got = conn.execute(
                        "SELECT has_schema_privilege(%s, 'USAGE'), "
                        "has_schema_privilege(%s, 'CREATE')",
                        [schema, schema],
                    ).fetchone()
                    usable = bool(got and got[0] and got[1])
        except psycopg.Error as exc:
            raise PostgresConnectionError(
                f"cannot use the PostgreSQL warehouse {self.masked}: "
                f"{reason(exc, self.url, lines=2)}"
            ) from None
        if version < 150000:
            raise PostgresConnectionError(
                f"{self.masked}: PostgreSQL {version // 10000} is too old; the engine needs 15 "
                "or newer (MERGE)"
            )
        if not can_create:
            raise PostgresConnectionError(
                f"{self.masked}: user {user!r} may not create schemas in database {database!r}, "
                f'which audit areas need (GRANT CREATE ON DATABASE "{database}" TO "{user}")'
            )
        if not usable:
            raise PostgresConnectionError(
                f"{self.masked}: user {user!r} may not use and create tables in schema "
                f'{schema!r} (GRANT USAGE, CREATE ON SCHEMA "{schema}" TO "{user}")'
            )
        self._checked = True

    # -- psycopg ----------------------------------------------------------------------------
    def _get_pool(self) -> Pool:
        with self._lock:
            if self._pool is None:
                self._pool = open_pool(
                    PoolSpec(
                        self.url,
                        name="backfill-postgres",
                        min_size=0,
                        max_size=self.pool_size,
                        configure=_configure,
                        timeout=max(30.0, self.connect_timeout),
                        kwargs={"connect_timeout": max(1, int(self.connect_timeout))},
                    )
                )
            return self._pool

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit; use ``conn.transaction()`` for a transaction)."""
        for attempt in range(3):
            pool = self._get_pool()
            try:
                conn = pool.getconn()
                break
            except PoolClosed:  # another thread closed the engine meanwhile: a fresh pool
                with self._lock:
                    if self._pool is pool:
                        self._pool = None
                if attempt == 2:
                    raise
            except PoolTimeout as exc:
                raise PostgresConnectionError(
                    f"no connection to {self.masked} within the pool's timeout: "
                    f"{reason(exc, self.url, lines=2)}"
                ) from None
        try:
            with self._in_use.lent(conn):
                yield conn
        finally:
            pool.putconn(conn)  # a closed pool closes it

    def interrupt(self) -> None:
        """Cancels the statement each checked-out connection runs now (the server ends it with
        QueryCanceled; its transaction rolls back)."""
        self._in_use.interrupt(lambda conn: conn.cancel_safe(timeout=2.0), (psycopg.Error,))

    # -- ADBC (Arrow) -----------------------------------------------------------------------
    @contextlib.contextmanager
    def arrow_cursor(self) -> Iterator[Any]:
        """An ADBC cursor whose ``fetch_record_batch()`` streams a result as Arrow batches.
        Opening an ADBC connection reads the server's type catalog (~0.1 s), so connections
        are kept for reuse until :meth:`close`."""
        import adbc_driver_manager
        import adbc_driver_postgresql.dbapi as adbc  # type: ignore[import-untyped]

        with self._lock:
            conn = self._adbc.pop() if self._adbc else None
        if conn is None:
            try:
                conn = adbc.connect(self.url, autocommit=True)
            except adbc_driver_manager.Error as exc:  # the DB-API base of every ADBC error
                raise PostgresConnectionError(
                    f"cannot open an Arrow (ADBC) connection to {self.masked}: "
                    f"{reason(exc, self.url, lines=2)}"
                ) from None
        cur = conn.cursor()
        ok = False
        try:
            cur.execute(_SESSION.split(";")[0])  # the one setting the streamed values depend on
            yield cur
            ok = True
        finally:
            with contextlib.suppress(adbc_driver_manager.Error):
                cur.close()
            with self._lock:
                keep = ok and len(self._adbc) < self.pool_size
                if keep:
                    self._adbc.append(conn)
            if not keep:
                with contextlib.suppress(adbc_driver_manager.Error):
                    conn.close()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            adbc, self._adbc = self._adbc, []
        if pool is not None:
            pool.close()
        if adbc:
            import adbc_driver_manager  # loaded already: it made these connections

            for conn in adbc:
                with contextlib.suppress(adbc_driver_manager.Error):
                    conn.close()
