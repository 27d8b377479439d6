"""The Postgres ledger: one database that workers on many hosts share.

>>> ledger = open_ledger("postgresql://backfill:secret@db:5432/ops")     # doctest: +SKIP

The operations are :class:`~.sql.SqlLedger`'s; this module holds what a shared server does
differently:

* Claims are one statement: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks ready tasks no other
  claimer is taking, and the same statement marks them running, inserts their attempts and their
  leases (:mod:`.postgres_sql`). Its scan starts at the handle's floor of the backfill (no task
  below it was pending when it last looked, and none went back to pending since: the requeue
  count of schema version 10 says so), not at the index entries of every task claimed since the
  last VACUUM. Claims, ``claim_task`` and a task's end are prepared statements run through libpq
  (:mod:`.postgres_fast`). ``claim_task`` locks the backfill's row ``FOR SHARE`` and the task's
  ``FOR UPDATE``; creates of one project take turns on an advisory lock.
* Lease expiries and stamps come from the DATABASE clock (``clock_timestamp()``), so hosts with
  skewed clocks agree on who holds a task. Workers on other hosts are judged by expiry alone; the
  pid check (:func:`~.records.worker_dead`) only applies to this host's workers.
* A lost connection is retried with backoff for :attr:`PostgresLedger.retry_seconds`. A retried
  write whose COMMIT's outcome is unknown checks first whether it landed (a claim by its token,
  a finish by its attempt's end, a create/audit/publication by its row): nothing lost or doubled.
* psycopg errors leave as :class:`~.records.LedgerError` naming the URL, password masked
  (:mod:`backfill._postgres`, whose pools this ledger shares).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from ..._postgres import Pool, PoolSpec, acquire_pool, is_connection_lost, reason, release_pool
from ..._secrets import mask_url
from ...errors import InvalidInputError
from . import postgres_sql as q
from .backend import FinishOutcome
from .overlap import overlap_lock_key
from .postgres_fast import execute_prepared
from .records import Claim, LedgerError, TaskRow, task_row, worker_dead
from .schema import POSTGRES, AllowValues, values_text
from .sql import Db, Finishing, SqlLedger, WriteMode, late_report, log_dropped, log_lost
from .states import ENDED_ATTEMPTS, IllegalTransitionError, TaskState

__all__ = ["PostgresLedger", "mask_url"]

log = logging.getLogger(__name__)

R = TypeVar("R")
Conn = psycopg.Connection[tuple[Any, ...]]
_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Any 64-bit key; it only has to be the same for every backfill process.
_SCHEMA_LOCK_KEY = 0x6266_6C65_6467  # "bfledg"
# ``:name`` parameters (not ``::type`` casts) of the statements SqlLedger writes
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
_CLOCK = {
    "now": q.NOW,
    "clock": "clock_timestamp()",
    "epoch": "extract(epoch FROM clock_timestamp())",
    "expires": "clock_timestamp() + make_interval(secs => %(secs)s)",
}


@functools.cache
def _render(sql: str) -> bytes:
    """``sql`` with psycopg's ``%(name)s`` parameters and the database's clock."""
    escaped = sql.replace("%", "%%")
    return _PARAM.sub(lambda m: _CLOCK.get(m[1], f"%({m[1]})s"), escaped).encode()


def _split_url(url: str) -> tuple[str, str]:
    """(the libpq URL without ``schema=``, the ledger's schema)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.path.strip("/"):
        raise InvalidInputError(
            f"ledger URL {mask_url(url)!r}: expected "
            "postgresql://user[:password]@host[:port]/database[?schema=name]"
        )
    params = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in params if k == "schema"), "backfill_ledger")
    if not _SCHEMA_RE.fullmatch(schema):
        raise InvalidInputError(
            f"ledger URL {mask_url(url)!r}: schema {schema!r} must be a "
            "lower-case SQL identifier (letters, digits, '_')"
        )
    rest = urlencode([(k, v) for k, v in params if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def _int(value: bytes | None) -> int:
    if value is None:  # pragma: no cover - the statements return NOT NULL columns here
        raise LedgerError("the ledger returned NULL where a number was expected")
    return int(value)


def _claimed(r: Sequence[bytes | None], encoding: str) -> Claim:
    """A claim from a row of a prepared claim (text values, as execute_prepared returns them):
    the task's columns (q.TASK_COLUMNS), started_at, the attempt's id."""

    def text(value: bytes | None) -> str | None:
        return None if value is None else value.decode(encoding)

    task = task_row(
        (
            _int(r[0]),
            text(r[1]),
            text(r[2]),
            text(r[3]),
            text(r[4]),
            _int(r[5]),
            _int(r[6]),
            text(r[7]),
            _int(r[8]),
            None if r[9] is None else int(r[9]),
            text(r[10]),
            text(r[11]),
        )
    )
    return Claim(task, task.attempts, _int(r[13]))


class PostgresLedger(SqlLedger):
    """The ledger in schema ``?schema=`` (default ``backfill_ledger``) of the database at
    ``url``. Thread-safe (a small connection pool per process, made again after a fork).
    Implements :class:`~.backend.LedgerBackend`."""

    dialect = POSTGRES
    share_lock = " FOR SHARE"
    update_lock = " FOR UPDATE"
    json_field = "{col}::jsonb ->> '{key}'"

    #: how long an operation retries a lost connection before it gives up
    retry_seconds: float = 60.0
    pool_size: int = 4
    #: at most this long between checks of the pids of this host's workers (see :meth:`claim`)
    local_check_seconds: float = 1.0

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        self.url = mask_url(url)  # shown in every message; the real one stays in _conninfo
        self.where = self.url
        self._conninfo, self.schema = _split_url(url)
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": f"-c search_path={self.schema}",
            "connect_timeout": max(1, int(connect_timeout)),
            "application_name": "backfill",
        }
        self._pool: Pool | None = None
        self._pid = os.getpid()
        # backfill -> time.monotonic() of the last check of this host's workers by this handle
        self._checked_local: dict[str, float] = {}
        # backfill -> where its claims' scans start (q.CLAIM's gen, fw, ft): no pending task
        # lies below (fw, ft) while the backfill's requeue count is still gen
        self._floors: dict[str, dict[str, int]] = {}
        try:  # checked here, before anything is claimed or written: reachable, allowed, ours
            with psycopg.connect(self._conninfo, **self._kwargs) as db, db.transaction():
                self._prepare(db)
        except psycopg.Error as exc:
            raise LedgerError(f"ledger {self.url}: opening failed: {self._reason(exc)}") from exc

    def __repr__(self) -> str:
        return f"PostgresLedger({self.url!r})"

    def _reason(self, exc: BaseException) -> str:
        return reason(exc, self._conninfo)

    # -- connections, retries, errors ----------------------------------------------------------
    def _connections(self) -> Pool:
        if self._pool is None or self._pid != os.getpid():
            # A forked child must not share the parent's sockets: it gets its own pool.
            self._pid = os.getpid()
            spec = PoolSpec(self._conninfo, "backfill-ledger", self.pool_size, self._kwargs)
            self._pool = acquire_pool(spec)
        return self._pool

    def _do(self, what: str, fn: Callable[[Conn, bool], R]) -> R:
        """Runs ``fn(connection, retried)``; a lost connection (or a deadlock) runs it again with
        backoff until :attr:`retry_seconds` pass. ``retried`` tells ``fn`` that an earlier try
        may have committed, so a write checks first whether it landed."""
        deadline = time.monotonic() + self.retry_seconds
        delay, retried = 0.05, False
        while True:
            try:
                # getconn/putconn, not the pool's connection() context: its commit-on-exit is
                # for non-autocommit use (ours are autocommit; transactions are explicit) and
                # costs client CPU on every statement. putconn rolls back a broken transaction.
                pool = self._connections()
                conn = pool.getconn()
                try:
                    return fn(conn, retried)
                finally:
                    pool.putconn(conn)
            except psycopg.Error as exc:
                if not is_connection_lost(exc):
                    raise LedgerError(
                        f"ledger {self.url}: {what} failed: {self._reason(exc)}"
                    ) from exc
                if time.monotonic() + delay > deadline:
                    raise LedgerError(
                        f"ledger {self.url}: {what} failed after retrying for "
                        f"{self.retry_seconds:.0f}s: {self._reason(exc)}"
                    ) from exc
                log.warning(
                    "ledger %s: %s failed (%s); retrying in %.2fs",
                    self.url,
                    what,
                    self._reason(exc).splitlines()[0],
                    delay,
                )
                time.sleep(delay)
                delay, retried = min(delay * 2, 2.0), True

    def _read(self, what: str, fn: Callable[[Db], R]) -> R:
        return self._do(what, lambda db, _: fn(db))

    def _run_write(self, what: str, fn: Callable[[Db, bool], R], mode: WriteMode) -> R:
        # Every commit is durable here (the server's synchronous_commit decides).
        def run(db: Conn, retried: bool) -> R:
            if mode.one_statement:  # autocommit: one round trip, no BEGIN/COMMIT
                return fn(db, retried)
            with db.transaction():
                return fn(db, retried)

        return self._do(what, run)

    def _render(self, sql: str) -> Any:
        return _render(sql)

    def close(self) -> None:
        if self._pool is not None and self._pid == os.getpid():
            release_pool(self._pool)
        self._pool = None

    # -- schema --------------------------------------------------------------------------------
    def _lock_schema(self, db: Db) -> None:
        # The advisory lock (released at the transaction's end) makes concurrent openers on
        # many hosts wait for the first one.
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
        db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'.encode())

    def _has_table(self, db: Db, name: str) -> bool:
        found = db.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s", (self.schema, name)
        ).fetchone()
        return found is not None

    def _ledger_noun(self) -> str:
        return f"schema {self.schema!r}"

    def _allow_values(self, db: Db, step: AllowValues) -> None:
        name = f"{step.table}_{step.column}_check"
        db.execute(f"ALTER TABLE {step.table} DROP CONSTRAINT {name}")
        db.execute(
            f"ALTER TABLE {step.table} ADD CONSTRAINT {name} "
            f"CHECK ({step.column} IN ({values_text(step.after)}))"
        )

    # -- backfills -----------------------------------------------------------------------------
    def _lock_project(self, db: Db, project: str) -> None:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (overlap_lock_key(project),))

    def _insert_tasks(self, db: Db, bid: str, tasks: Sequence[Mapping[str, Any]]) -> None:
        with db.cursor().copy(q.COPY_TASKS) as copy:
            for t in tasks:
                copy.write_row(q.task_copy_row(bid, t))
        with db.cursor().copy(q.COPY_DEPS) as copy:
            for t in tasks:
                for d in t["depends_on"]:
                    copy.write_row((bid, t["task_id"], d))

    def _created(self, tasks: int) -> None:
        if tasks >= 1000:
            # Fresh statistics before the first claims: planned with an empty table's
            # estimates, a claim would scan every pending task instead of a few.
            self._do("recording a backfill", lambda db, _: db.execute("ANALYZE tasks, task_deps"))

    # -- claims: one statement each ------------------------------------------------------------
    def _drop_dead_leases(self, db: Db, backfill_id: str) -> int:
        """Ends the leases of gone workers (expired by the database's clock, or dead processes
        of this host): their attempts become abandoned, their tasks pending. Returns how many."""
        host = socket.gethostname()
        local = db.execute(q.LOCAL_WORKERS, {"b": backfill_id, "host": host + ":"}).fetchall()
        dead = [str(w) for (w,) in local if worker_dead(str(w))]
        self._checked_local[backfill_id] = time.monotonic()
        if dead:
            dropped = db.execute(q.DROP_DEAD, {"b": backfill_id, "dead": dead}).fetchall()
        else:
            dropped = db.execute(q.DROP_EXPIRED, {"b": backfill_id}).fetchall()
        for task_id, worker, expired in dropped:
            log_dropped(backfill_id, task_id, worker, expired=bool(expired))
        return len(dropped)

    def _claims(self, db: Db, sql: bytes, params: Mapping[str, Any]) -> list[Claim]:
        # rows: the task's columns (q.TASK_COLUMNS), ..., the attempt's id last
        return [
            Claim(task_row(r), int(r[8]), int(r[-1])) for r in db.execute(sql, params).fetchall()
        ]

    def _claim_ready(self, db: Conn, params: Mapping[str, Any]) -> list[Claim]:
        """q.claim(n) from this handle's floor of the backfill; keeps the floor the claim saw."""
        bid = params["b"]
        values = {**params, **self._floors.get(bid, q.NO_FLOOR)}
        name, sql = q.claim(params["n"])
        rows = execute_prepared(db, name, sql, [values[p] for p in q.CLAIM_PARAMS], q.CLAIM_TYPES)
        # rows: the task's columns (q.TASK_COLUMNS), started_at, the attempt's id, the floor
        if rows and rows[0][15] is not None:
            gen, wave, task = rows[0][14:17]
            self._floors[bid] = {"gen": _int(gen), "fw": _int(wave), "ft": _int(task)}
        return [_claimed(r, db.info.encoding) for r in rows]

    def _reclaimed(self, db: Db, token: str) -> list[Claim]:
        return self._claims(db, q.CLAIMED_BY_TOKEN, {"tok": token})

    def _start(self, db: Db, params: Mapping[str, Any], from_states: list[TaskState]) -> Claim:
        (claim,) = self._claims(db, q.CLAIM_ONE, params)
        return claim

    def claim(self, backfill_id: str, worker: str, limit: int, lease_seconds: float) -> list[Claim]:
        """One statement while every lease of the backfill is alive. Dead leases are dropped
        (then the claim is made again) when the claim finds an expired one (it probes the index
        of expiries and claims nothing then), when it gets fewer tasks than ``limit``, or once
        every :attr:`local_check_seconds`: only then are the pids of this host's workers
        checked, a read of every lease of the backfill, which per claim cost more than the claim
        itself (2.4 ms of server CPU per claim + finish of one task before)."""
        if limit <= 0:
            return []
        token = uuid.uuid4().hex
        params = {
            "b": backfill_id,
            "w": worker,
            "n": limit,
            "secs": float(lease_seconds),
            "tok": token,
        }

        def run(db: Conn, retried: bool) -> list[Claim]:
            if retried:
                again = self._reclaimed(db, token)
                if again:
                    return again
            claims = self._claim_ready(db, params)
            checked = self._checked_local.get(backfill_id, -math.inf)
            due = time.monotonic() - checked >= self.local_check_seconds
            short = len(claims) < limit
            if (short or due) and self._drop_dead_leases(db, backfill_id) and short:
                more = self._claim_ready(db, {**params, "n": limit - len(claims)})
                claims = sorted([*claims, *more], key=lambda c: (c.task.wave, c.task.task_id))
            return claims

        return self._do("claiming tasks", run)

    def claim_task(
        self, backfill_id: str, task_id: int, worker: str, lease_seconds: float
    ) -> Claim | TaskRow:
        """One statement when the task can be claimed (q.CLAIM_TASK); otherwise SqlLedger's
        transaction, which drops dead leases and says why not (or returns a done task's row)."""
        token = uuid.uuid4().hex
        params = {
            "b": backfill_id,
            "t": task_id,
            "w": worker,
            "secs": float(lease_seconds),
            "tok": token,
        }

        def run(db: Conn, retried: bool) -> Claim | None:
            if retried and (again := self._reclaimed(db, token)):
                return again[0]
            name, sql = q.CLAIM_TASK_PREPARED
            values = [params[p] for p in q.CLAIM_TASK_PARAMS]
            got = execute_prepared(db, name, sql, values, q.CLAIM_TASK_TYPES)
            return _claimed(got[0], db.info.encoding) if got else None

        claim = self._do("claiming a task", run)
        if claim is not None:
            return claim
        return super().claim_task(backfill_id, task_id, worker, lease_seconds)

    def _finish(self, f: Finishing) -> FinishOutcome:
        """Ends the attempt in one statement that lands only while it holds the lease."""
        end = f.end
        params = (
            f.backfill_id,
            f.task_id,
            f.worker,
            f.claim.attempt_id,
            "done" if end.ok else "failed",
            repr(float(end.seconds)),
            end.rows,
            end.deleted,
            f.fingerprint,
            end.error,
            None if end.retry_in is None else repr(float(end.retry_in)),
            f.target.value,
            late_report(end.ok, end.seconds),
            f.bug,
        )  # q.FINISH_PARAMS
        name, sql = q.finish(f.target)
        ended = [s.value for s in ENDED_ATTEMPTS]

        def run(db: Conn, retried: bool) -> FinishOutcome:
            if retried:  # did the earlier try commit? then its outcome stands
                row = db.execute(
                    "SELECT status FROM attempts WHERE id = %s", (f.claim.attempt_id,)
                ).fetchone()
                if row is not None and row[0] in ended:
                    return f.outcome
            try:  # the one statement every task runs: libpq's prepared call (postgres_fast)
                ((held,),) = execute_prepared(db, name, sql, params, q.FINISH_TYPES)
            except psycopg.errors.RaiseException as exc:  # ledger_fail: nothing was written
                raise IllegalTransitionError(f.bug) from exc
            if held == b"1":
                return f.outcome
            log_lost(f.backfill_id, f.claim, f.worker)
            return "lost"

        return self._do("recording a task's end", run)
