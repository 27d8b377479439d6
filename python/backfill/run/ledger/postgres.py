"""The Postgres ledger: one database that workers on many hosts share.

>>> ledger = open_ledger("postgresql://backfill:secret@db:5432/ops")     # doctest: +SKIP

The same protocol as the SQLite ledger (:class:`~.backend.LedgerBackend`), with what a shared
server adds:

* Claims are one statement: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks ready tasks no other
  claimer is taking, and the same statement marks them running, inserts their attempts and their
  leases. Status writes are guarded ``UPDATE ... WHERE status IN (...)`` from :mod:`.states`,
  and the tables carry CHECK constraints on every status column.
* Lease expiries come from the DATABASE clock (``clock_timestamp()``), so hosts with skewed
  clocks agree on who holds a task. Workers on other hosts are judged by expiry alone; the pid
  check (:func:`~.records.worker_dead`) only applies to this host's workers.
* A lost connection is retried with backoff for :attr:`PostgresLedger.retry_seconds`. A retried
  write whose COMMIT's outcome is unknown checks first whether it landed (a claim by its token,
  a finish by its attempt's end, a create/audit/publication by its row): nothing lost or doubled.
* psycopg errors leave as :class:`~.records.LedgerError` naming the URL, password masked.

SQL text: :mod:`.postgres_sql`; tables, version and migrations: :mod:`.postgres_schema`.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from ..._secrets import mask_text, mask_url
from ...errors import ConflictError, InvalidInputError, NotFoundError
from . import postgres_sql as q
from .backend import FinishOutcome
from .cost_records import PostgresCostRecords
from .overlap import find_overlaps, overlap_error, overlap_lock_key
from .postgres_fast import execute_prepared
from .postgres_ops import PostgresOps
from .postgres_schema import prepare
from .records import (
    AUDIT_KEYS,
    BACKFILL_KEYS,
    OPTIONAL_BACKFILL_KEYS,
    PUBLICATION_KEYS,
    BackfillExistsError,
    Claim,
    LedgerError,
    TaskBusyError,
    TaskRow,
    check_backfill_input,
    iso_utc,
    require_keys,
    task_row,
    worker_dead,
)
from .replay_records import PostgresReplayRecords
from .states import (
    BACKFILL_TRANSITIONS,
    BackfillState,
    IllegalTransitionError,
    TaskState,
    allowed_from,
    finished_stamp,
    refused_backfill_move,
    set_status_target,
    sources,
)

__all__ = ["PostgresLedger", "mask_url"]

log = logging.getLogger(__name__)

R = TypeVar("R")
Conn = psycopg.Connection[tuple[Any, ...]]
_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_OUTCOME: dict[str, FinishOutcome] = {"done": "done", "pending": "pending", "failed": "failed"}


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


# One pool per (process, database, schema), shared by the handles open on it and closed when
# the last one closes (or at exit). Handles that are never closed (a Backfill keeps its ledger)
# so keep their pool referenced here: a pool collected as garbage would close itself from
# whichever thread the collector ran in, possibly one of its own (which cannot join itself).
_POOLS: dict[tuple[int, str, str], tuple[ConnectionPool[Conn], int]] = {}
_POOLS_LOCK = threading.Lock()


def _shared_pool(conninfo: str, kwargs: dict[str, Any], size: int) -> ConnectionPool[Conn]:
    key = (os.getpid(), conninfo, str(kwargs["options"]))
    with _POOLS_LOCK:
        pool, users = _POOLS.get(key, (None, 0))
        if pool is None:
            pool = ConnectionPool(
                conninfo,
                kwargs=kwargs,
                min_size=1,
                max_size=size,
                open=True,
                timeout=10.0,
                name=f"backfill-ledger-{os.getpid()}",
            )
        _POOLS[key] = (pool, users + 1)
        return pool


def _release_pool(pool: ConnectionPool[Conn]) -> None:
    with _POOLS_LOCK:
        for key, (held, users) in list(_POOLS.items()):
            if held is pool:
                if users > 1:
                    _POOLS[key] = (held, users - 1)
                    return
                del _POOLS[key]
    pool.close()


@atexit.register
def _close_pools() -> None:
    with _POOLS_LOCK:
        mine = [p for (pid, _, _), (p, _) in _POOLS.items() if pid == os.getpid()]
        _POOLS.clear()
    for pool in mine:
        pool.close()


class PostgresLedger(PostgresOps, PostgresReplayRecords, PostgresCostRecords):
    """The ledger in schema ``?schema=`` (default ``backfill_ledger``) of the database at
    ``url``. Thread-safe (a small connection pool per process, made again after a fork).
    Implements :class:`~.backend.LedgerBackend`."""

    #: how long an operation retries a lost connection before it gives up
    retry_seconds: float = 60.0
    pool_size: int = 4

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        self.url = mask_url(url)  # shown in every message; the real one stays in _conninfo
        self._conninfo, self.schema = _split_url(url)
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": f"-c search_path={self.schema}",
            "connect_timeout": max(1, int(connect_timeout)),
            "application_name": "backfill",
        }
        self._pool: ConnectionPool[Conn] | None = None
        self._pid = os.getpid()
        try:  # checked here, before anything is claimed or written: reachable, allowed, ours
            with psycopg.connect(self._conninfo, **self._kwargs) as db:
                with db.transaction():
                    prepare(db, self.schema, self.url)
        except psycopg.Error as exc:
            raise LedgerError(f"ledger {self.url}: opening failed: {self._reason(exc)}") from exc

    def __repr__(self) -> str:
        return f"PostgresLedger({self.url!r})"

    def _reason(self, exc: BaseException) -> str:
        """``exc``'s text with the ledger URL's secrets masked (a driver may quote the
        connection string it could not use)."""
        return mask_text(str(exc).strip(), urls=(self._conninfo,)) or type(exc).__name__

    # -- connections, retries, errors ----------------------------------------------------------
    def _connections(self) -> ConnectionPool[Conn]:
        if self._pool is None or self._pid != os.getpid():
            # A forked child must not share the parent's sockets: it gets its own pool.
            self._pid = os.getpid()
            self._pool = _shared_pool(self._conninfo, self._kwargs, self.pool_size)
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
            except psycopg.OperationalError as exc:  # connection lost, server restarting, ...
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
            except psycopg.Error as exc:
                raise LedgerError(f"ledger {self.url}: {what} failed: {self._reason(exc)}") from exc

    def close(self) -> None:
        if self._pool is not None and self._pid == os.getpid():
            _release_pool(self._pool)
        self._pool = None

    # -- backfills -----------------------------------------------------------------------------
    def create_backfill(
        self,
        record: Mapping[str, Any],
        tasks: Sequence[Mapping[str, Any]],
        *,
        check_overlap: bool = False,
    ) -> None:
        check_backfill_input(record, tasks)
        bid = record["id"]

        def run(db: Conn, retried: bool) -> None:
            with db.transaction():
                # Creates of a project take turns: an overlap check sees the other's tasks.
                db.execute(
                    "SELECT pg_advisory_xact_lock(%s)", (overlap_lock_key(record["project"]),)
                )
                if check_overlap:  # rows of this id are a lost try's own, not another's
                    found = find_overlaps(
                        tasks,
                        [
                            r
                            for r in self._open_rows(db, record["project"])
                            if r["backfill_id"] != bid
                        ],
                    )
                    if found:
                        raise overlap_error(bid, found)
                created = db.execute(
                    q.INSERT_BACKFILL,
                    {
                        **{k: record[k] for k in BACKFILL_KEYS},
                        **{k: record.get(k) for k in OPTIONAL_BACKFILL_KEYS},
                        "status": BackfillState.PENDING.value,
                    },
                ).fetchone()
                if created is None:
                    if retried and self._recorded_as(db, record, len(tasks)):
                        return  # the earlier try committed before its connection was lost
                    raise BackfillExistsError(f"backfill {bid} is recorded already in {self.url}")
                with db.cursor().copy(q.COPY_TASKS) as copy:
                    for t in tasks:
                        copy.write_row(
                            (
                                bid,
                                t["task_id"],
                                t["model"],
                                iso_utc(t["start"]),
                                iso_utc(t["end"]),
                                t["label"],
                                t["partitions"],
                                t["wave"],
                                TaskState.PENDING.value,
                            )
                        )
                with db.cursor().copy(q.COPY_DEPS) as copy:
                    for t in tasks:
                        for d in t["depends_on"]:
                            copy.write_row((bid, t["task_id"], d))
            if len(tasks) >= 1000:
                # Fresh statistics before the first claims: planned with an empty table's
                # estimates, a claim would scan every pending task instead of a few.
                db.execute("ANALYZE tasks, task_deps")

        self._do("recording a backfill", run)

    @staticmethod
    def _recorded_as(db: Conn, record: Mapping[str, Any], count: int) -> bool:
        row = db.execute(
            "SELECT plan, reason, created_by, (SELECT count(*) FROM tasks WHERE "
            "backfill_id = %s) FROM backfills WHERE id = %s",
            (record["id"], record["id"]),
        ).fetchone()
        return row is not None and tuple(row) == (
            record["plan"],
            record["reason"],
            record["created_by"],
            count,
        )

    def _not_found(self, db: Conn, backfill_id: str) -> NotFoundError:
        known = [
            r[0]
            for r in db.execute(
                "SELECT id FROM backfills ORDER BY created_at DESC, id DESC LIMIT 5"
            )
        ]
        return NotFoundError(
            f"no backfill {backfill_id!r} in {self.url}; recent: {', '.join(known) or 'none'}"
        )

    def _dicts(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        def run(db: Conn, _: bool) -> list[dict[str, Any]]:
            with db.cursor(row_factory=dict_row) as cur:
                return cur.execute(sql.encode(), params).fetchall()

        return self._do(what, run)

    def backfill(self, backfill_id: str) -> dict[str, Any]:
        def run(db: Conn, _: bool) -> dict[str, Any]:
            with db.cursor(row_factory=dict_row) as cur:
                row = cur.execute(
                    "SELECT * FROM backfills WHERE id = %s", (backfill_id,)
                ).fetchone()
            if row is None:
                raise self._not_found(db, backfill_id)
            return row

        return self._do("reading a backfill", run)

    def backfills(self, limit: int = 50) -> list[dict[str, Any]]:
        return self._dicts(
            "listing backfills",
            "SELECT * FROM backfills ORDER BY created_at DESC, id DESC LIMIT %s",
            (limit,),
        )

    def latest(self) -> str | None:
        rows = self._dicts(
            "finding the latest backfill",
            "SELECT id FROM backfills ORDER BY created_at DESC, id DESC LIMIT 1",
        )
        return str(rows[0]["id"]) if rows else None

    def set_status(
        self, backfill_id: str, status: BackfillState | str, *, finished: bool = False
    ) -> None:
        target = set_status_target(backfill_id, status)

        def run(db: Conn, _: bool) -> None:
            with db.transaction():
                self._move_backfill(db, backfill_id, target, allowed_from(target), finished, True)

        self._do("changing a backfill's status", run)

    def _move_backfill(
        self,
        db: Conn,
        backfill_id: str,
        target: BackfillState,
        from_states: list[BackfillState],
        finished: bool,
        stay_ok: bool,
    ) -> None:
        cur = db.execute(
            q.move_backfill(finished_stamp(target, finished)),
            (target.value, backfill_id, [s.value for s in from_states]),
        )
        if cur.rowcount:
            return
        row = db.execute("SELECT status FROM backfills WHERE id = %s", (backfill_id,)).fetchone()
        if row is None:
            raise self._not_found(db, backfill_id)
        refused_backfill_move(backfill_id, row[0], target, stay_ok)

    # -- tasks ---------------------------------------------------------------------------------
    def tasks(self, backfill_id: str) -> list[TaskRow]:
        def run(db: Conn, _: bool) -> list[TaskRow]:
            deps: dict[int, list[int]] = {}
            for tid, dep in db.execute(
                "SELECT task_id, dep_id FROM task_deps WHERE backfill_id = %s", (backfill_id,)
            ):
                deps.setdefault(int(tid), []).append(int(dep))
            rows = db.execute(
                f"SELECT {q.TASK_COLUMNS} FROM tasks WHERE backfill_id = %s "
                "ORDER BY task_id".encode(),
                (backfill_id,),
            ).fetchall()
            return [task_row(r, deps.get(int(r[0]), ())) for r in rows]

        return self._do("reading tasks", run)

    def attempts(self, backfill_id: str) -> list[dict[str, Any]]:
        return self._dicts(
            "reading attempts",
            "SELECT * FROM attempts WHERE backfill_id = %s ORDER BY id",
            (backfill_id,),
        )

    def _drop_dead_leases(self, db: Conn, backfill_id: str) -> None:
        """Ends the leases of gone workers (expired by the database's clock, or dead processes
        of this host): their attempts become abandoned, their tasks pending."""
        host = socket.gethostname()
        local = [
            str(w)
            for (w,) in db.execute(
                "SELECT DISTINCT worker FROM leases WHERE backfill_id = %s AND "
                "starts_with(worker, %s)",
                (backfill_id, host + ":"),
            )
        ]
        dead = [w for w in local if worker_dead(w)]
        for task_id, worker, expired in db.execute(q.DROP_DEAD, {"b": backfill_id, "dead": dead}):
            log.warning(
                "backfill %s: task %s: worker %s lost its lease (%s); the task is claimable again",
                backfill_id,
                task_id,
                worker,
                "expired" if expired else "process gone",
            )

    def _claims(self, db: Conn, sql: bytes, params: dict[str, Any]) -> list[Claim]:
        # rows: the task's columns (q.TASK_COLUMNS), ..., the attempt's id last
        return [
            Claim(task_row(r), int(r[8]), int(r[-1])) for r in db.execute(sql, params).fetchall()
        ]

    def _reclaimed(self, db: Conn, token: str) -> list[Claim]:
        """The claims an earlier try of this call committed (found by its token)."""
        return self._claims(db, q.CLAIMED_BY_TOKEN, {"tok": token})

    def claim(self, backfill_id: str, worker: str, limit: int, lease_seconds: float) -> list[Claim]:
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
            self._drop_dead_leases(db, backfill_id)
            return self._claims(db, q.CLAIM, params)

        return self._do("claiming tasks", run)

    def claim_task(
        self, backfill_id: str, task_id: int, worker: str, lease_seconds: float
    ) -> Claim | TaskRow:
        token = uuid.uuid4().hex
        params = {
            "b": backfill_id,
            "t": task_id,
            "w": worker,
            "secs": float(lease_seconds),
            "tok": token,
        }

        def run(db: Conn, retried: bool) -> Claim | TaskRow:
            if retried and (again := self._reclaimed(db, token)):
                return again[0]
            self._drop_dead_leases(db, backfill_id)
            with db.transaction():
                return self._claim_one(db, backfill_id, task_id, params)

        return self._do("claiming a task", run)

    def _claim_one(
        self, db: Conn, backfill_id: str, task_id: int, params: dict[str, Any]
    ) -> Claim | TaskRow:
        self._refuse_held(db, backfill_id)
        row = db.execute(
            "SELECT status FROM tasks WHERE backfill_id = %s AND task_id = %s FOR UPDATE",
            (backfill_id, task_id),
        ).fetchone()
        if row is None:
            (count,) = db.execute(
                "SELECT count(*) FROM tasks WHERE backfill_id = %s", (backfill_id,)
            ).fetchone() or (0,)
            raise NotFoundError(
                f"backfill {backfill_id} has no task {task_id!r} (task ids are 0..{int(count) - 1})"
                if count
                else f"no backfill {backfill_id!r} (or it has no tasks) in {self.url}"
            )
        status = TaskState(row[0])
        if status is TaskState.DONE:
            return self._task(db, backfill_id, task_id)
        if status is TaskState.RUNNING:
            held = db.execute(
                "SELECT worker, to_char(expires_at AT TIME ZONE 'UTC', "
                "'HH24:MI:SS') FROM leases WHERE backfill_id = %s AND task_id = %s",
                (backfill_id, task_id),
            ).fetchone()
            who, until = held if held else ("?", "?")
            raise TaskBusyError(
                f"task {task_id} of {backfill_id} is running in worker {who} "
                f"(lease until {until} UTC)"
            )
        waiting = db.execute(q.WAITING_DEPS, (backfill_id, task_id)).fetchall()
        if waiting:
            shown = ", ".join(f"{m} {lbl} (task {t}, {s})" for t, m, lbl, s in waiting[:5])
            more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
            raise ConflictError(
                f"task {task_id} of {backfill_id} depends on tasks not done: "
                f"{shown}{more}; run them first"
            )
        (claim,) = self._claims(db, q.CLAIM_ONE, params)
        return claim

    def _task(self, db: Conn, backfill_id: str, task_id: int) -> TaskRow:
        r = db.execute(
            f"SELECT {q.TASK_COLUMNS} FROM tasks WHERE backfill_id = %s AND task_id = %s".encode(),
            (backfill_id, task_id),
        ).fetchone()
        assert r is not None  # locked FOR UPDATE in this transaction
        return task_row(r)

    def renew(
        self, backfill_id: str, worker: str, task_ids: Sequence[int], lease_seconds: float
    ) -> int:
        """Extends the worker's leases on ``task_ids``; returns how many it still held."""
        if not task_ids:
            return 0

        def run(db: Conn, _: bool) -> int:
            cur = db.execute(q.RENEW, (float(lease_seconds), backfill_id, worker, list(task_ids)))
            return int(cur.rowcount)

        return self._do("renewing leases", run)

    def finish(
        self,
        claim: Claim,
        backfill_id: str,
        worker: str,
        *,
        ok: bool,
        rows: int | None,
        deleted: int | None,
        fingerprint: str | None,
        seconds: float,
        error: str | None,
        retry_at: float | None,
    ) -> FinishOutcome:
        """Ends the attempt in one statement that lands only while it holds the lease."""
        tid = claim.task.task_id
        target = (
            TaskState.DONE
            if ok
            else TaskState.PENDING
            if retry_at is not None
            else TaskState.FAILED
        )
        bug = f"task {tid} of {backfill_id} is not running; it cannot become {target}"
        params = (
            backfill_id,
            tid,
            worker,
            claim.attempt_id,
            "done" if ok else "failed",
            repr(float(seconds)),
            rows,
            deleted,
            fingerprint,
            error,
            None if retry_at is None else repr(float(retry_at)),
            target.value,
            f"; reported {'success' if ok else 'failure'} after {seconds:.1f}s, "
            "after losing the lease",
            bug,
        )  # q.FINISH_PARAMS
        name, sql = q.finish(target)

        def run(db: Conn, retried: bool) -> FinishOutcome:
            if retried:  # did the earlier try commit? then its outcome stands
                row = db.execute(
                    "SELECT status FROM attempts WHERE id = %s", (claim.attempt_id,)
                ).fetchone()
                if row is not None and row[0] in ("done", "failed"):
                    return _OUTCOME[target.value]
            try:  # the one statement every task runs: libpq's prepared call (postgres_fast)
                ((held,),) = execute_prepared(db, name, sql, params, q.FINISH_TYPES)
            except psycopg.errors.RaiseException as exc:  # ledger_fail: nothing was written
                raise IllegalTransitionError(bug) from exc
            if held == b"1":
                return _OUTCOME[target.value]
            log.warning(
                "backfill %s: task %s attempt %d of worker %s ended after its lease "
                "was lost; its result is not used",
                backfill_id,
                tid,
                claim.attempt,
                worker,
            )
            return "lost"

        return self._do("recording a task's end", run)

    def reset_failed(self, backfill_id: str) -> int:
        def run(db: Conn, _: bool) -> int:
            return int(db.execute(q.RESET_FAILED, (backfill_id,)).rowcount)

        return self._do("resetting failed tasks", run)

    def live_workers(self, backfill_id: str) -> set[str]:
        rows = self._dicts(
            "listing live workers",
            "SELECT DISTINCT worker FROM leases WHERE "
            "backfill_id = %s AND expires_at >= clock_timestamp()",
            (backfill_id,),
        )
        return {str(r["worker"]) for r in rows if not worker_dead(str(r["worker"]))}

    # -- audits and publications ---------------------------------------------------------------
    def record_audit(
        self,
        backfill_id: str,
        audit_id: str,
        created_at: str,
        created_by: str,
        models: Sequence[Mapping[str, Any]],
    ) -> None:
        for m in models:
            require_keys(m, AUDIT_KEYS, f"audit {audit_id} model row")
        rows = [
            (
                backfill_id,
                m["model"],
                created_at,
                created_by,
                int(bool(m["passed"])),
                json.dumps(m["published_fingerprints"]),
                json.dumps({"audit_id": audit_id, **m["result"]}, default=str),
            )
            for m in models
        ]

        def run(db: Conn, retried: bool) -> None:
            with db.transaction():
                if (
                    db.execute(
                        "SELECT 1 FROM backfills WHERE id = %s FOR SHARE", (backfill_id,)
                    ).fetchone()
                    is None
                ):
                    raise self._not_found(db, backfill_id)
                if retried and db.execute(q.AUDIT_RECORDED, (backfill_id, audit_id)).fetchone():
                    return  # the earlier try committed
                with db.cursor() as cur:
                    cur.executemany(q.INSERT_AUDIT, rows)

        self._do("recording an audit", run)

    def record_publication(self, backfill_id: str, publication: Mapping[str, Any]) -> None:
        require_keys(publication, PUBLICATION_KEYS, f"publication of {backfill_id}")
        pid = publication["publication_id"]
        values = (
            backfill_id,
            publication["published_at"],
            publication["published_by"],
            publication["note"],
            publication["forced_reason"],
            json.dumps({"publication_id": pid, "models": publication["models"]}),
        )

        def run(db: Conn, retried: bool) -> None:
            if retried and db.execute(q.PUBLICATION_RECORDED, (backfill_id, pid)).fetchone():
                return  # the earlier try committed
            with db.transaction():
                done = sources(BACKFILL_TRANSITIONS, BackfillState.PUBLISHED)
                self._move_backfill(db, backfill_id, BackfillState.PUBLISHED, done, False, False)
                db.execute(q.INSERT_PUBLICATION, values)

        self._do("recording a publication", run)

    def audits(self, backfill_id: str) -> list[dict[str, Any]]:
        return self._dicts(
            "reading audits",
            "SELECT * FROM audits WHERE backfill_id = %s ORDER BY id",
            (backfill_id,),
        )

    def publications(self, backfill_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM publications" + (" WHERE backfill_id = %s" if backfill_id else "")
        return self._dicts(
            "reading publications", sql + " ORDER BY id", (backfill_id,) if backfill_id else ()
        )
