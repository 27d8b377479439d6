"""The SQLite ledger: one file (under the project's ``.backfill/``) recording every backfill,
task, attempt, lease, audit and publication.

Several runner processes (Airflow workers on one machine, say) share one file. Every write is one
``BEGIN IMMEDIATE`` transaction, so writers take turns. A task is claimed together with a lease
that expires; a worker renews its leases while its tasks run. A lease whose worker is gone
(expired, or a dead process on this host) is dropped at the next claim, and its task is claimed
again. So a task never runs twice at once, and a killed worker's task is picked up again.

Every status write is a guarded ``UPDATE ... WHERE status IN (...)`` whose states come from
:mod:`.states`; ``sqlite3`` errors leave as :class:`~.records.LedgerError`. Tables and the schema
version: :mod:`.sqlite_schema`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import json
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ...errors import ConflictError, NotFoundError
from .backend import FinishOutcome
from .cost_records import SqliteCostRecords
from .overlap import OPEN_ROWS_SQL, Overlap, find_overlaps, overlap_error
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
    utcnow,
    worker_dead,
)
from .replay_records import SqliteReplayRecords
from .sqlite_errors import storage_errors as _storage
from .sqlite_ops import SqliteOps
from .sqlite_schema import prepare
from .states import (
    ATTEMPT_TRANSITIONS,
    BACKFILL_TRANSITIONS,
    TASK_TRANSITIONS,
    AttemptState,
    BackfillState,
    IllegalTransitionError,
    TaskState,
    allowed_from,
    finished_stamp,
    refused_backfill_move,
    set_status_target,
    sources,
)

__all__ = ["Ledger"]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=enum.Enum)

_TASK_COLUMNS = (
    "task_id, model, start, end, label, partitions, wave, status, attempts, "
    "rows_written, fingerprint, error"
)
_OUTCOME: dict[TaskState, FinishOutcome] = {
    TaskState.DONE: "done",
    TaskState.PENDING: "pending",
    TaskState.FAILED: "failed",
}


def _marks(states: Iterable[E]) -> tuple[str, list[str]]:
    """``?, ?`` and the values for a ``status IN (...)`` guard."""
    values = [str(s.value) for s in states]
    return ", ".join("?" for _ in values), values


def _close_connections(
    opened: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]],
    lock: threading.Lock | None,
    *,
    only_finished: bool,
) -> None:
    """Closes the connections in ``opened`` (all, or with ``only_finished`` only those whose
    thread has finished) and forgets them; takes ``lock`` when given (the finalizer's call)."""
    with lock if lock is not None else contextlib.nullcontext():
        keep = []
        for thread_ref, conn in opened:
            thread = thread_ref()
            if only_finished and thread is not None and thread.is_alive():
                keep.append((thread_ref, conn))
            else:
                conn.close()
        opened[:] = keep


class Ledger(SqliteOps, SqliteReplayRecords, SqliteCostRecords):
    """The SQLite ledger at ``path`` (created on first use). Safe across threads (a connection
    per thread) and processes (SQLite's locking; on one machine, not over network file systems).
    Implements :class:`~.backend.LedgerBackend`."""

    @_storage("opening")
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        # Every connection this ledger opened, with its thread: a thread's connection outlives
        # the thread in its threading.local only until the GC, which would drop it unclosed
        # (Python 3.13 warns: ResourceWarning). Connections of finished threads are closed as
        # new ones open, all of them by close(), and by the finalizer if close() never comes.
        self._opened: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._opened_lock = threading.Lock()
        weakref.finalize(
            self, _close_connections, self._opened, self._opened_lock, only_finished=False
        )
        if self.path.is_dir():
            raise LedgerError(
                f"ledger {self.path} is a directory; expected a file (e.g. "
                f"{self.path / 'ledger.sqlite'})"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._tx() as db:
                prepare(db, self.path)
        except BaseException:
            # Re-raised as it is: only the connection is let go. A refused file (newer
            # version, not a ledger) is not held open; on success the connection stays.
            self.close()
            raise

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    @staticmethod
    def for_project_path(state_dir: str | Path) -> Path:
        return Path(state_dir) / "ledger.sqlite"

    @classmethod
    def for_project(cls, state_dir: str | Path) -> Ledger:
        return cls(cls.for_project_path(state_dir))

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # check_same_thread=False only so that close() may close it from another thread;
            # each connection is used by the thread that opened it alone.
            conn = sqlite3.connect(
                self.path, timeout=60, isolation_level=None, check_same_thread=False
            )
            with self._opened_lock:
                _close_connections(self._opened, None, only_finished=True)
                self._opened.append((weakref.ref(threading.current_thread()), conn))
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL, not FULL: in WAL mode a commit then skips its fsync (2.6 ms median, 15 ms
            # at p90 on the benchmark machine; a task commits twice, claim and finish) and the
            # file stays consistent; only a power loss or OS crash can lose the last commits.
            # Such a loss leaves states a killed process leaves anyway (a task done in the
            # warehouse but not in the ledger runs again; a claim's lease is gone), which the
            # ledger already recovers from. Records nothing re-creates (a backfill, its status,
            # an audit, a publication) commit with FULL: _tx(durable=True).
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def _tx(self, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """A write transaction; ``durable``: its commit (and every earlier one) is synced."""
        db = self._conn()
        if durable:
            db.execute("PRAGMA synchronous=FULL")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                # Re-raised as it is (an SQLite error, a bug, Ctrl-C): the transaction is
                # rolled back first. Not a finally: only a failure rolls back. SQLite may have
                # rolled back already (a full disk, an I/O error): a ROLLBACK then fails with
                # "no transaction is active" and would hide the error that matters.
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            if durable:
                db.execute("PRAGMA synchronous=NORMAL")

    @_storage("closing")
    def close(self) -> None:
        """Closes every connection of this ledger, of every thread; a later call reopens."""
        with self._opened_lock:
            _close_connections(self._opened, None, only_finished=False)
        self._local = threading.local()

    # -- backfills -----------------------------------------------------------------------------
    @_storage("recording a backfill")
    def create_backfill(
        self,
        record: Mapping[str, Any],
        tasks: Sequence[Mapping[str, Any]],
        *,
        check_overlap: bool = False,
    ) -> None:
        check_backfill_input(record, tasks)
        now = utcnow()
        # BEGIN IMMEDIATE: no other create between the check and the write
        with self._tx(durable=True) as db:
            if db.execute("SELECT 1 FROM backfills WHERE id = ?", (record["id"],)).fetchone():
                raise BackfillExistsError(
                    f"backfill {record['id']} is recorded already in {self.path}"
                )
            if check_overlap:
                found = find_overlaps(tasks, self._open_rows(db, record["project"]))
                if found:
                    raise overlap_error(record["id"], found)
            db.execute(
                "INSERT INTO backfills (id, project, project_root, selection, exclude, start, end, "
                "as_of, reason, mode, engine, plan, models, created_by, created_at, status, "
                "updated_at, options) VALUES (:id, :project, :project_root, :selection, "
                ":exclude, :start, :end, :as_of, :reason, :mode, :engine, :plan, :models, "
                ":created_by, :now, :status, :now, :options)",
                {
                    **{k: record[k] for k in BACKFILL_KEYS},
                    **{k: record.get(k) for k in OPTIONAL_BACKFILL_KEYS},
                    "now": now,
                    "status": BackfillState.PENDING.value,
                },
            )
            db.executemany(
                "INSERT INTO tasks (backfill_id, task_id, model, start, end, label, partitions, "
                "wave, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        record["id"],
                        t["task_id"],
                        t["model"],
                        iso_utc(t["start"]),
                        iso_utc(t["end"]),
                        t["label"],
                        t["partitions"],
                        t["wave"],
                        TaskState.PENDING.value,
                    )
                    for t in tasks
                ],
            )
            db.executemany(
                "INSERT INTO task_deps VALUES (?, ?, ?)",
                [(record["id"], t["task_id"], d) for t in tasks for d in t["depends_on"]],
            )

    @staticmethod
    def _open_rows(db: sqlite3.Connection, project: str) -> list[dict[str, Any]]:
        cur = db.execute(OPEN_ROWS_SQL, (project,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    @_storage("finding overlapping backfills")
    def overlaps(self, project: str, tasks: Sequence[Mapping[str, Any]]) -> list[Overlap]:
        return find_overlaps(tasks, self._open_rows(self._conn(), project))

    def _not_found(self, db: sqlite3.Connection, backfill_id: str) -> NotFoundError:
        known = [
            r[0]
            for r in db.execute(
                "SELECT id FROM backfills ORDER BY created_at DESC, id DESC LIMIT 5"
            )
        ]
        return NotFoundError(
            f"no backfill {backfill_id!r} in {self.path}; recent: {', '.join(known) or 'none'}"
        )

    @_storage("reading a backfill")
    def backfill(self, backfill_id: str) -> dict[str, Any]:
        db = self._conn()
        row = db.execute("SELECT * FROM backfills WHERE id = ?", (backfill_id,)).fetchone()
        if row is None:
            raise self._not_found(db, backfill_id)
        return self._row_dict("backfills", row)

    @_storage("listing backfills")
    def backfills(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = (
            self._conn()
            .execute("SELECT * FROM backfills ORDER BY created_at DESC, id DESC LIMIT ?", (limit,))
            .fetchall()
        )
        return [self._row_dict("backfills", r) for r in rows]

    @_storage("finding the latest backfill")
    def latest(self) -> str | None:
        row = (
            self._conn()
            .execute("SELECT id FROM backfills ORDER BY created_at DESC, id DESC LIMIT 1")
            .fetchone()
        )
        return None if row is None else str(row[0])

    @_storage("changing a backfill's status")
    def set_status(
        self, backfill_id: str, status: BackfillState | str, *, finished: bool = False
    ) -> None:
        """Moves the backfill to ``status`` if the lifecycle allows it from its current one
        (:mod:`.states`); the guarded UPDATE makes check and change one step."""
        target = set_status_target(backfill_id, status)
        with self._tx(durable=True) as db:
            self._move_backfill(db, backfill_id, target, allowed_from(target), finished, True)

    def _move_backfill(
        self,
        db: sqlite3.Connection,
        backfill_id: str,
        target: BackfillState,
        from_states: list[BackfillState],
        finished: bool,
        stay_ok: bool,
    ) -> None:
        now = utcnow()
        marks, values = _marks(from_states)
        finished_sql = {"now": "?", "clear": "NULL", "keep": "finished_at"}[
            finished_stamp(target, finished)
        ]
        cur = db.execute(
            f"UPDATE backfills SET status = ?, updated_at = ?, finished_at = "
            f"{finished_sql} WHERE id = ? AND status IN ({marks})",
            (target.value, now, *([now] if finished else []), backfill_id, *values),
        )
        if cur.rowcount:
            return
        row = db.execute("SELECT status FROM backfills WHERE id = ?", (backfill_id,)).fetchone()
        if row is None:
            raise self._not_found(db, backfill_id)
        refused_backfill_move(backfill_id, row[0], target, stay_ok)

    def _row_dict(self, table: str, row: tuple[Any, ...]) -> dict[str, Any]:
        cols = [c[1] for c in self._conn().execute(f"PRAGMA table_info({table})")]
        return dict(zip(cols, row))

    # -- tasks ---------------------------------------------------------------------------------
    @_storage("reading tasks")
    def tasks(self, backfill_id: str) -> list[TaskRow]:
        db = self._conn()
        deps: dict[int, list[int]] = {}
        for tid, dep in db.execute(
            "SELECT task_id, dep_id FROM task_deps WHERE backfill_id = ?", (backfill_id,)
        ):
            deps.setdefault(int(tid), []).append(int(dep))
        rows = db.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE backfill_id = ? ORDER BY task_id",
            (backfill_id,),
        ).fetchall()
        return [task_row(r, deps.get(int(r[0]), ())) for r in rows]

    @_storage("reading attempts")
    def attempts(self, backfill_id: str) -> list[dict[str, Any]]:
        rows = (
            self._conn()
            .execute("SELECT * FROM attempts WHERE backfill_id = ? ORDER BY id", (backfill_id,))
            .fetchall()
        )
        return [self._row_dict("attempts", r) for r in rows]

    def _drop_dead_leases(self, db: sqlite3.Connection, backfill_id: str, now: float) -> None:
        """Ends the leases of gone workers: their attempts become abandoned, their tasks
        pending (claimable again)."""
        a_marks, a_from = _marks(sources(ATTEMPT_TRANSITIONS, AttemptState.ABANDONED))
        t_marks, t_from = _marks(
            sources(TASK_TRANSITIONS, TaskState.PENDING, among=[TaskState.RUNNING])
        )
        for task_id, worker, attempt_id, expires in db.execute(
            "SELECT task_id, worker, attempt_id, expires_at FROM leases WHERE backfill_id = ?",
            (backfill_id,),
        ).fetchall():
            if expires >= now and not worker_dead(worker):
                continue
            log.warning(
                "backfill %s: task %s: worker %s lost its lease (%s); the task is claimable again",
                backfill_id,
                task_id,
                worker,
                "expired" if expires < now else "process gone",
            )
            db.execute(
                "DELETE FROM leases WHERE backfill_id = ? AND task_id = ?", (backfill_id, task_id)
            )
            db.execute(
                f"UPDATE attempts SET status = ?, finished_at = ?, error = ? "
                f"WHERE id = ? AND status IN ({a_marks})",
                (
                    AttemptState.ABANDONED.value,
                    utcnow(),
                    f"worker {worker} lost its lease",
                    attempt_id,
                    *a_from,
                ),
            )
            db.execute(
                f"UPDATE tasks SET status = ? WHERE backfill_id = ? AND task_id = ? "
                f"AND status IN ({t_marks})",
                (TaskState.PENDING.value, backfill_id, task_id, *t_from),
            )

    @_storage("claiming tasks")
    def claim(self, backfill_id: str, worker: str, limit: int, lease_seconds: float) -> list[Claim]:
        """Claims up to ``limit`` ready tasks (pending, due, every dependency done)."""
        if limit <= 0:
            return []
        now = time.time()
        with self._tx() as db:
            if self._held(db, backfill_id):
                return []  # paused or cancelled: running tasks finish, nothing new starts
            self._drop_dead_leases(db, backfill_id, now)
            ready = db.execute(
                "SELECT t.task_id FROM tasks t WHERE t.backfill_id = ? AND t.status = ? "
                "AND t.not_before <= ? AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p "
                "ON p.backfill_id = d.backfill_id AND p.task_id = d.dep_id WHERE "
                "d.backfill_id = t.backfill_id AND d.task_id = t.task_id AND p.status != ?) "
                "ORDER BY t.wave, t.task_id LIMIT ?",
                (backfill_id, TaskState.PENDING.value, now, TaskState.DONE.value, limit),
            ).fetchall()
            return [
                self._start(
                    db, backfill_id, task_id, worker, now + lease_seconds, [TaskState.PENDING]
                )
                for (task_id,) in ready
            ]

    def _start(
        self,
        db: sqlite3.Connection,
        backfill_id: str,
        task_id: int,
        worker: str,
        lease_until: float,
        from_states: list[TaskState],
    ) -> Claim:
        """Marks the task running, records a new attempt and leases it to ``worker``."""
        stamp = utcnow()
        marks, values = _marks(sources(TASK_TRANSITIONS, TaskState.RUNNING, among=from_states))
        cur = db.execute(
            f"UPDATE tasks SET status = ?, attempts = attempts + 1, not_before = 0, "
            f"started_at = ?, error = NULL WHERE backfill_id = ? AND task_id = ? "
            f"AND status IN ({marks}) RETURNING attempts",
            (TaskState.RUNNING.value, stamp, backfill_id, task_id, *values),
        )
        row = cur.fetchone()
        if row is None:  # the caller checked the state in this transaction: a bug if reached
            raise IllegalTransitionError(
                f"task {task_id} of {backfill_id} is not "
                f"{' or '.join(s.value for s in from_states)}"
            )
        attempt = int(row[0])
        cur = db.execute(
            "INSERT INTO attempts (backfill_id, task_id, attempt, worker, status, "
            "started_at) VALUES (?, ?, ?, ?, ?, ?)",
            (backfill_id, task_id, attempt, worker, AttemptState.RUNNING.value, stamp),
        )
        attempt_id = int(cur.lastrowid or 0)
        db.execute(
            "INSERT INTO leases VALUES (?, ?, ?, ?, ?)",
            (backfill_id, task_id, worker, attempt_id, lease_until),
        )
        return Claim(self._task(db, backfill_id, task_id), attempt, attempt_id)

    @_storage("claiming a task")
    def claim_task(
        self, backfill_id: str, task_id: int, worker: str, lease_seconds: float
    ) -> Claim | TaskRow:
        """Claims exactly task ``task_id`` (an orchestrator such as Airflow decides what runs
        where). Returns the :class:`Claim`, or the task's row when it is already done.

        A failed task is claimed again (the orchestrator decided to retry it). Raises
        :class:`TaskBusyError` while another live worker holds its lease, and
        :class:`~backfill.errors.ConflictError` when a dependency is not done."""
        now = time.time()
        with self._tx() as db:
            self._refuse_held(db, backfill_id)
            self._drop_dead_leases(db, backfill_id, now)
            row = db.execute(
                "SELECT status FROM tasks WHERE backfill_id = ? AND task_id = ?",
                (backfill_id, task_id),
            ).fetchone()
            if row is None:
                count = db.execute(
                    "SELECT count(*) FROM tasks WHERE backfill_id = ?", (backfill_id,)
                ).fetchone()[0]
                raise NotFoundError(
                    f"backfill {backfill_id} has no task {task_id!r} (task ids "
                    f"are 0..{int(count) - 1})"
                    if count
                    else f"no backfill {backfill_id!r} (or it has no tasks) in {self.path}"
                )
            status = TaskState(row[0])
            if status is TaskState.DONE:
                return self._task(db, backfill_id, task_id)
            if status is TaskState.RUNNING:
                held = db.execute(
                    "SELECT worker, expires_at FROM leases WHERE backfill_id = ? AND task_id = ?",
                    (backfill_id, task_id),
                ).fetchone()
                worker_held, until = held if held else ("?", now)
                expires = dt.datetime.fromtimestamp(until, dt.timezone.utc)
                raise TaskBusyError(
                    f"task {task_id} of {backfill_id} is running in worker "
                    f"{worker_held} (lease until {expires:%H:%M:%S} UTC)"
                )
            waiting = db.execute(
                "SELECT p.task_id, p.model, p.label, p.status FROM task_deps d JOIN tasks p ON "
                "p.backfill_id = d.backfill_id AND p.task_id = d.dep_id WHERE d.backfill_id = ? "
                "AND d.task_id = ? AND p.status != ? ORDER BY p.task_id",
                (backfill_id, task_id, TaskState.DONE.value),
            ).fetchall()
            if waiting:
                shown = ", ".join(f"{m} {lbl} (task {t}, {s})" for t, m, lbl, s in waiting[:5])
                more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
                raise ConflictError(
                    f"task {task_id} of {backfill_id} depends on tasks not done: "
                    f"{shown}{more}; run them first"
                )
            return self._start(
                db,
                backfill_id,
                task_id,
                worker,
                now + lease_seconds,
                [TaskState.PENDING, TaskState.FAILED],
            )

    def _task(self, db: sqlite3.Connection, backfill_id: str, task_id: int) -> TaskRow:
        r = db.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE backfill_id = ? AND task_id = ?",
            (backfill_id, task_id),
        ).fetchone()
        return task_row(r)

    @_storage("renewing leases")
    def renew(
        self, backfill_id: str, worker: str, task_ids: Sequence[int], lease_seconds: float
    ) -> int:
        if not task_ids:
            return 0
        with self._tx() as db:
            until = time.time() + lease_seconds
            return sum(
                db.execute(
                    "UPDATE leases SET expires_at = ? WHERE backfill_id = ? AND "
                    "task_id = ? AND worker = ?",
                    (until, backfill_id, t, worker),
                ).rowcount
                for t in task_ids
            )

    @_storage("recording a task's end")
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
        """Records an attempt's end. Returns the task's new status (pending when retried), or
        ``"lost"`` when the attempt no longer held the task's lease."""
        tid = claim.task.task_id
        stamp = utcnow()
        with self._tx() as db:
            held = db.execute(
                "SELECT 1 FROM leases WHERE backfill_id = ? AND task_id = ? AND "
                "worker = ? AND attempt_id = ?",
                (backfill_id, tid, worker, claim.attempt_id),
            ).fetchone()
            if held is None:
                # The lease was dropped (the attempt is abandoned, final) and the task may be
                # someone else's now: keep what this worker reports for the record only.
                late = (
                    f"; reported {'success' if ok else 'failure'} after {seconds:.1f}s, "
                    "after losing the lease"
                )
                db.execute(
                    "UPDATE attempts SET error = coalesce(error, '') || ? WHERE id = ? "
                    "AND status = ?",
                    (late, claim.attempt_id, AttemptState.ABANDONED.value),
                )
                log.warning(
                    "backfill %s: task %s attempt %d of worker %s ended after its lease "
                    "was lost; its result is not used",
                    backfill_id,
                    tid,
                    claim.attempt,
                    worker,
                )
                return "lost"
            db.execute(
                "DELETE FROM leases WHERE backfill_id = ? AND task_id = ?", (backfill_id, tid)
            )
            ended = AttemptState.DONE if ok else AttemptState.FAILED
            a_marks, a_from = _marks(sources(ATTEMPT_TRANSITIONS, ended))
            db.execute(
                f"UPDATE attempts SET status = ?, finished_at = ?, seconds = ?, "
                f"rows_written = ?, rows_deleted = ?, fingerprint = ?, error = ? "
                f"WHERE id = ? AND status IN ({a_marks})",
                (
                    ended.value,
                    stamp,
                    seconds,
                    rows,
                    deleted,
                    fingerprint,
                    error,
                    claim.attempt_id,
                    *a_from,
                ),
            )
            target = (
                TaskState.DONE
                if ok
                else TaskState.PENDING
                if retry_at is not None
                else TaskState.FAILED
            )
            t_marks, t_from = _marks(sources(TASK_TRANSITIONS, target, among=[TaskState.RUNNING]))
            values: list[Any]
            if target is TaskState.DONE:
                sets, values = (
                    "rows_written = ?, fingerprint = ?, finished_at = ?, error = NULL",
                    [rows, fingerprint, stamp],
                )
            elif target is TaskState.PENDING:
                sets, values = "not_before = ?, error = ?", [retry_at, error]
            else:
                sets, values = "error = ?, finished_at = ?", [error, stamp]
            cur = db.execute(
                f"UPDATE tasks SET status = ?, {sets} WHERE backfill_id = ? AND "
                f"task_id = ? AND status IN ({t_marks})",
                (target.value, *values, backfill_id, tid, *t_from),
            )
            if cur.rowcount != 1:  # a held lease means a running task: a bug if reached
                raise IllegalTransitionError(
                    f"task {tid} of {backfill_id} is not running; it cannot become {target}"
                )
        return _OUTCOME[target]

    @_storage("resetting failed tasks")
    def reset_failed(self, backfill_id: str) -> int:
        """Makes failed tasks pending again (a resume gives them fresh attempts)."""
        marks, values = _marks(
            sources(TASK_TRANSITIONS, TaskState.PENDING, among=[TaskState.FAILED])
        )
        with self._tx() as db:
            cur = db.execute(
                f"UPDATE tasks SET status = ?, attempts = 0, not_before = 0 "
                f"WHERE backfill_id = ? AND status IN ({marks})",
                (TaskState.PENDING.value, backfill_id, *values),
            )
            return int(cur.rowcount)

    @_storage("listing live workers")
    def live_workers(self, backfill_id: str) -> set[str]:
        """Workers holding an unexpired lease on one of the backfill's tasks (minus dead
        processes on this host)."""
        rows = (
            self._conn()
            .execute(
                "SELECT DISTINCT worker FROM leases WHERE backfill_id = ? AND expires_at >= ?",
                (backfill_id, time.time()),
            )
            .fetchall()
        )
        return {str(w) for (w,) in rows if not worker_dead(str(w))}

    # -- audits and publications ---------------------------------------------------------------
    @_storage("recording an audit")
    def record_audit(
        self,
        backfill_id: str,
        audit_id: str,
        created_at: str,
        created_by: str,
        models: Sequence[Mapping[str, Any]],
    ) -> None:
        """Records one audit: per model ``model``, ``passed``, ``published_fingerprints``
        (label -> "rows:digest") and ``result`` (the JSON-able audit of the model)."""
        for m in models:
            require_keys(m, AUDIT_KEYS, f"audit {audit_id} model row")
        with self._tx(durable=True) as db:
            known = db.execute("SELECT 1 FROM backfills WHERE id = ?", (backfill_id,)).fetchone()
            if known is None:
                raise self._not_found(db, backfill_id)
            db.executemany(
                "INSERT INTO audits (backfill_id, model, created_at, created_by, passed, "
                "published_fingerprints, result) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
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
                ],
            )

    @_storage("recording a publication")
    def record_publication(self, backfill_id: str, publication: Mapping[str, Any]) -> None:
        """Records a publication (``published_at``, ``published_by``, ``note``,
        ``forced_reason``, ``publication_id``, ``models``: model -> changed partition labels)
        and marks the done backfill published, in one transaction."""
        require_keys(publication, PUBLICATION_KEYS, f"publication of {backfill_id}")
        with self._tx(durable=True) as db:
            done = sources(BACKFILL_TRANSITIONS, BackfillState.PUBLISHED)
            self._move_backfill(db, backfill_id, BackfillState.PUBLISHED, done, False, False)
            db.execute(
                "INSERT INTO publications (backfill_id, published_at, published_by, note, "
                "forced_reason, models) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    backfill_id,
                    publication["published_at"],
                    publication["published_by"],
                    publication["note"],
                    publication["forced_reason"],
                    json.dumps(
                        {
                            "publication_id": publication["publication_id"],
                            "models": publication["models"],
                        }
                    ),
                ),
            )

    @_storage("reading audits")
    def audits(self, backfill_id: str) -> list[dict[str, Any]]:
        rows = (
            self._conn()
            .execute("SELECT * FROM audits WHERE backfill_id = ? ORDER BY id", (backfill_id,))
            .fetchall()
        )
        return [self._row_dict("audits", r) for r in rows]

    @_storage("reading publications")
    def publications(self, backfill_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM publications" + (" WHERE backfill_id = ?" if backfill_id else "")
        rows = (
            self._conn()
            .execute(sql + " ORDER BY id", (backfill_id,) if backfill_id else ())
            .fetchall()
        )
        return [self._row_dict("publications", r) for r in rows]
