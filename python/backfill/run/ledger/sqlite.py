"""The ledger: a SQLite file under the project's ``.backfill/`` recording every backfill, task,
attempt, lease, audit and publication.

Several runner processes (Airflow workers on one machine, say) share one ledger. A task is
claimed inside a ``BEGIN IMMEDIATE`` transaction together with a lease that expires; a worker
renews its leases while its tasks run. A lease whose worker is gone (expired, or a dead process on
this host) is dropped at the next claim, and its task is claimed again. So a task never runs twice
at once, and a killed worker's task is picked up again.

Tables: backfills, tasks, task_deps, attempts, leases, audits, publications (the last two are
written by audit and publish).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConflictError, InvalidInputError, NotFoundError
from .states import BackfillState, allowed_from, check_backfill_transition

__all__ = ["BackfillExistsError", "Claim", "Ledger", "TaskBusyError", "TaskRow", "new_worker_id",
           "utcnow"]

SCHEMA_VERSION = 1
TASK_STATUSES = ("pending", "running", "done", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS backfills (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    project_root TEXT,
    selection TEXT NOT NULL,
    exclude TEXT,
    start TEXT NOT NULL,
    end TEXT NOT NULL,
    as_of TEXT,
    reason TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('audit', 'direct')),
    engine TEXT NOT NULL,
    plan TEXT NOT NULL,
    models TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed',
                                           'published', 'discarded')),
    updated_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS tasks (
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    task_id INTEGER NOT NULL,
    model TEXT NOT NULL,
    start TEXT,
    end TEXT,
    label TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    wave INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0,
    rows_written INTEGER,
    fingerprint TEXT,
    error TEXT,
    started_at TEXT,
    finished_at TEXT,
    PRIMARY KEY (backfill_id, task_id)
);
CREATE INDEX IF NOT EXISTS tasks_status ON tasks (backfill_id, status, wave);
CREATE TABLE IF NOT EXISTS task_deps (
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    dep_id INTEGER NOT NULL,
    PRIMARY KEY (backfill_id, task_id, dep_id)
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    worker TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'abandoned')),
    started_at TEXT NOT NULL,
    finished_at TEXT,
    seconds REAL,
    rows_written INTEGER,
    rows_deleted INTEGER,
    fingerprint TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS attempts_task ON attempts (backfill_id, task_id);
CREATE TABLE IF NOT EXISTS leases (
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    worker TEXT NOT NULL,
    attempt_id INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (backfill_id, task_id)
);
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    model TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    passed INTEGER NOT NULL,
    published_fingerprints TEXT,
    result TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS publications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    published_at TEXT NOT NULL,
    published_by TEXT NOT NULL,
    note TEXT,
    forced_reason TEXT,
    models TEXT NOT NULL
);
"""


def utcnow() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def new_worker_id() -> str:
    """``host:pid:token`` — the host and pid let a worker on the same host see a dead one."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _worker_dead(worker: str) -> bool:
    host, _, rest = worker.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another host: only lease expiry tells
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class TaskBusyError(ConflictError):
    """The task is running in another live worker (its lease is held); try again later."""


class BackfillExistsError(ConflictError):
    """A backfill with that id is recorded already."""


@dataclass(frozen=True)
class TaskRow:
    task_id: int
    model: str
    start: dt.datetime | None
    end: dt.datetime | None
    label: str
    partitions: int
    wave: int
    status: str
    attempts: int
    rows_written: int | None
    fingerprint: str | None
    error: str | None
    depends_on: tuple[int, ...] = ()


@dataclass(frozen=True)
class Claim:
    task: TaskRow
    attempt: int
    attempt_id: int


def _ts(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


class Ledger:
    """The ledger at ``path`` (created on first use). Safe across threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn().executescript(_SCHEMA)  # each statement is CREATE ... IF NOT EXISTS
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                       (str(SCHEMA_VERSION),))

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
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                   check_same_thread=True)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=60000")
            self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- backfills -----------------------------------------------------------------------------
    def create_backfill(self, record: Mapping[str, Any], tasks: Sequence[Mapping[str, Any]]) -> None:
        now = utcnow()
        with self._tx() as db:
            if db.execute("SELECT 1 FROM backfills WHERE id = ?", (record["id"],)).fetchone():
                raise BackfillExistsError(f"backfill {record['id']} is recorded already in "
                                          f"{self.path}")
            db.execute(
                "INSERT INTO backfills (id, project, project_root, selection, exclude, start, end, "
                "as_of, reason, mode, engine, plan, models, created_by, created_at, status, "
                "updated_at) VALUES (:id, :project, :project_root, :selection, :exclude, :start, "
                ":end, :as_of, :reason, :mode, :engine, :plan, :models, :created_by, :now, "
                "'pending', :now)", {**record, "now": now})
            db.executemany(
                "INSERT INTO tasks (backfill_id, task_id, model, start, end, label, partitions, "
                "wave, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
                [(record["id"], t["task_id"], t["model"], _iso(t["start"]), _iso(t["end"]),
                  t["label"], t["partitions"], t["wave"]) for t in tasks])
            db.executemany(
                "INSERT INTO task_deps VALUES (?, ?, ?)",
                [(record["id"], t["task_id"], d) for t in tasks for d in t["depends_on"]])

    def backfill(self, backfill_id: str) -> dict[str, Any]:
        row = self._conn().execute("SELECT * FROM backfills WHERE id = ?",
                                   (backfill_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self._conn().execute(
                "SELECT id FROM backfills ORDER BY created_at DESC LIMIT 5")]
            raise NotFoundError(f"no backfill {backfill_id!r} in {self.path}; recent: "
                                f"{', '.join(known) or 'none'}")
        return self._row_dict("backfills", row)

    def backfills(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            "SELECT * FROM backfills ORDER BY created_at DESC, id DESC LIMIT ?", (limit,)).fetchall()
        return [self._row_dict("backfills", r) for r in rows]

    def latest(self) -> str | None:
        row = self._conn().execute(
            "SELECT id FROM backfills ORDER BY created_at DESC, id DESC LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def set_status(self, backfill_id: str, status: str, *, finished: bool = False) -> None:
        """Moves the backfill to ``status`` if the lifecycle allows it from its current one
        (:mod:`.states`); the guarded UPDATE makes check and change one step."""
        with self._tx() as db:
            self._set_status(db, backfill_id, BackfillState(status), finished)

    def _set_status(self, db: sqlite3.Connection, backfill_id: str, status: BackfillState,
                    finished: bool) -> None:
        now = utcnow()
        allowed = [s.value for s in allowed_from(status)]
        marks = ", ".join("?" for _ in allowed)
        cur = db.execute(f"UPDATE backfills SET status = ?, updated_at = ?, finished_at = ? "
                         f"WHERE id = ? AND status IN ({marks})",
                         (status.value, now, now if finished else None, backfill_id, *allowed))
        if cur.rowcount == 0:
            row = db.execute("SELECT status FROM backfills WHERE id = ?",
                             (backfill_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no backfill {backfill_id!r} in {self.path}")
            check_backfill_transition(backfill_id, str(row[0]), status.value)

    def _row_dict(self, table: str, row: tuple[Any, ...]) -> dict[str, Any]:
        cols = [c[1] for c in self._conn().execute(f"PRAGMA table_info({table})")]
        return dict(zip(cols, row))

    # -- tasks ---------------------------------------------------------------------------------
    def tasks(self, backfill_id: str) -> list[TaskRow]:
        db = self._conn()
        deps: dict[int, list[int]] = {}
        for tid, dep in db.execute("SELECT task_id, dep_id FROM task_deps WHERE backfill_id = ?",
                                   (backfill_id,)):
            deps.setdefault(int(tid), []).append(int(dep))
        rows = db.execute(
            "SELECT task_id, model, start, end, label, partitions, wave, status, attempts, "
            "rows_written, fingerprint, error FROM tasks WHERE backfill_id = ? ORDER BY task_id",
            (backfill_id,)).fetchall()
        return [TaskRow(r[0], r[1], _ts(r[2]), _ts(r[3]), r[4], r[5], r[6], r[7], r[8], r[9],
                        r[10], r[11], tuple(sorted(deps.get(int(r[0]), ())))) for r in rows]

    def attempts(self, backfill_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            "SELECT * FROM attempts WHERE backfill_id = ? ORDER BY id", (backfill_id,)).fetchall()
        return [self._row_dict("attempts", r) for r in rows]

    def _drop_dead_leases(self, db: sqlite3.Connection, backfill_id: str, now: float) -> None:
        for task_id, worker, attempt_id, expires in db.execute(
                "SELECT task_id, worker, attempt_id, expires_at FROM leases WHERE backfill_id = ?",
                (backfill_id,)).fetchall():
            if expires < now or _worker_dead(worker):
                db.execute("DELETE FROM leases WHERE backfill_id = ? AND task_id = ?",
                           (backfill_id, task_id))
                db.execute("UPDATE attempts SET status = 'abandoned', finished_at = ?, error = ? "
                           "WHERE id = ? AND status = 'running'",
                           (utcnow(), f"worker {worker} lost its lease", attempt_id))
        # A task marked running without a live lease was abandoned: make it claimable again.
        db.execute("UPDATE tasks SET status = 'pending' WHERE backfill_id = ? AND status = "
                   "'running' AND task_id NOT IN (SELECT task_id FROM leases WHERE "
                   "backfill_id = ?)", (backfill_id, backfill_id))

    def claim(self, backfill_id: str, worker: str, limit: int, lease_seconds: float) -> list[Claim]:
        """Claims up to ``limit`` ready tasks (pending, due, every dependency done)."""
        if limit <= 0:
            return []
        now = time.time()
        with self._tx() as db:
            self._drop_dead_leases(db, backfill_id, now)
            ready = db.execute(
                "SELECT t.task_id FROM tasks t WHERE t.backfill_id = ? AND t.status = 'pending' "
                "AND t.not_before <= ? AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p "
                "ON p.backfill_id = d.backfill_id AND p.task_id = d.dep_id WHERE "
                "d.backfill_id = t.backfill_id AND d.task_id = t.task_id AND p.status != 'done') "
                "ORDER BY t.wave, t.task_id LIMIT ?", (backfill_id, now, limit)).fetchall()
            return [self._start(db, backfill_id, task_id, worker, now + lease_seconds)
                    for (task_id,) in ready]

    def _start(self, db: sqlite3.Connection, backfill_id: str, task_id: int, worker: str,
               lease_until: float) -> Claim:
        """Marks the task running, records a new attempt and leases it to ``worker``."""
        stamp = utcnow()
        db.execute("UPDATE tasks SET status = 'running', attempts = attempts + 1, not_before = 0, "
                   "started_at = ?, error = NULL WHERE backfill_id = ? AND task_id = ?",
                   (stamp, backfill_id, task_id))
        attempt = int(db.execute("SELECT attempts FROM tasks WHERE backfill_id = ? AND "
                                 "task_id = ?", (backfill_id, task_id)).fetchone()[0])
        cur = db.execute("INSERT INTO attempts (backfill_id, task_id, attempt, worker, status, "
                         "started_at) VALUES (?, ?, ?, ?, 'running', ?)",
                         (backfill_id, task_id, attempt, worker, stamp))
        attempt_id = int(cur.lastrowid or 0)
        db.execute("INSERT INTO leases VALUES (?, ?, ?, ?, ?)",
                   (backfill_id, task_id, worker, attempt_id, lease_until))
        return Claim(self._task(db, backfill_id, task_id), attempt, attempt_id)

    def claim_task(self, backfill_id: str, task_id: int, worker: str,
                   lease_seconds: float) -> Claim | TaskRow:
        """Claims exactly task ``task_id`` (an orchestrator such as Airflow decides what runs
        where). Returns the :class:`Claim`, or the task's row when it is already done.

        A failed task is claimed again (the orchestrator decided to retry it). Raises
        :class:`TaskBusyError` while another live worker holds its lease, and
        :class:`~backfill.errors.ConflictError` when a dependency is not done."""
        now = time.time()
        with self._tx() as db:
            self._drop_dead_leases(db, backfill_id, now)
            row = db.execute("SELECT status FROM tasks WHERE backfill_id = ? AND task_id = ?",
                             (backfill_id, task_id)).fetchone()
            if row is None:
                count = db.execute("SELECT count(*) FROM tasks WHERE backfill_id = ?",
                                   (backfill_id,)).fetchone()[0]
                raise NotFoundError(f"backfill {backfill_id} has no task {task_id!r} (task ids "
                                    f"are 0..{int(count) - 1})" if count else
                                    f"no backfill {backfill_id!r} (or it has no tasks) in "
                                    f"{self.path}")
            status = str(row[0])
            if status == "done":
                return self._task(db, backfill_id, task_id)
            if status == "running":
                held = db.execute("SELECT worker, expires_at FROM leases WHERE backfill_id = ? "
                                  "AND task_id = ?", (backfill_id, task_id)).fetchone()
                worker_held, until = held if held else ("?", now)
                expires = dt.datetime.fromtimestamp(until, dt.timezone.utc)
                raise TaskBusyError(f"task {task_id} of {backfill_id} is running in worker "
                                    f"{worker_held} (lease until {expires:%H:%M:%S} UTC)")
            waiting = db.execute(
                "SELECT p.task_id, p.model, p.label, p.status FROM task_deps d JOIN tasks p ON "
                "p.backfill_id = d.backfill_id AND p.task_id = d.dep_id WHERE d.backfill_id = ? "
                "AND d.task_id = ? AND p.status != 'done' ORDER BY p.task_id",
                (backfill_id, task_id)).fetchall()
            if waiting:
                shown = ", ".join(f"{m} {lbl} (task {t}, {s})" for t, m, lbl, s in waiting[:5])
                more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
                raise ConflictError(f"task {task_id} of {backfill_id} depends on tasks not done: "
                                    f"{shown}{more}; run them first")
            return self._start(db, backfill_id, task_id, worker, now + lease_seconds)

    def _task(self, db: sqlite3.Connection, backfill_id: str, task_id: int) -> TaskRow:
        r = db.execute(
            "SELECT task_id, model, start, end, label, partitions, wave, status, attempts, "
            "rows_written, fingerprint, error FROM tasks WHERE backfill_id = ? AND task_id = ?",
            (backfill_id, task_id)).fetchone()
        return TaskRow(r[0], r[1], _ts(r[2]), _ts(r[3]), r[4], r[5], r[6], r[7], r[8], r[9],
                       r[10], r[11])

    def renew(self, backfill_id: str, worker: str, task_ids: Sequence[int],
              lease_seconds: float) -> None:
        if not task_ids:
            return
        with self._tx() as db:
            db.executemany("UPDATE leases SET expires_at = ? WHERE backfill_id = ? AND "
                           "task_id = ? AND worker = ?",
                           [(time.time() + lease_seconds, backfill_id, t, worker) for t in task_ids])

    def finish(self, claim: Claim, backfill_id: str, worker: str, *, ok: bool, rows: int | None,
               deleted: int | None, fingerprint: str | None, seconds: float, error: str | None,
               retry_at: float | None) -> str:
        """Records an attempt's end. Returns the task's new status (pending when retried)."""
        tid = claim.task.task_id
        stamp = utcnow()
        with self._tx() as db:
            held = db.execute("SELECT worker FROM leases WHERE backfill_id = ? AND task_id = ?",
                              (backfill_id, tid)).fetchone()
            db.execute("UPDATE attempts SET status = ?, finished_at = ?, seconds = ?, "
                       "rows_written = ?, rows_deleted = ?, fingerprint = ?, error = ? WHERE id = ?",
                       ("done" if ok else "failed", stamp, seconds, rows, deleted, fingerprint,
                        error, claim.attempt_id))
            if held is None or held[0] != worker:
                # The lease was lost (expired) and the task is someone else's now.
                return "lost"
            db.execute("DELETE FROM leases WHERE backfill_id = ? AND task_id = ?",
                       (backfill_id, tid))
            if ok:
                status = "done"
                db.execute("UPDATE tasks SET status = 'done', rows_written = ?, fingerprint = ?, "
                           "finished_at = ?, error = NULL WHERE backfill_id = ? AND task_id = ?",
                           (rows, fingerprint, stamp, backfill_id, tid))
            elif retry_at is not None:
                status = "pending"
                db.execute("UPDATE tasks SET status = 'pending', not_before = ?, error = ? "
                           "WHERE backfill_id = ? AND task_id = ?", (retry_at, error, backfill_id, tid))
            else:
                status = "failed"
                db.execute("UPDATE tasks SET status = 'failed', error = ?, finished_at = ? "
                           "WHERE backfill_id = ? AND task_id = ?", (error, stamp, backfill_id, tid))
        return status

    def reset_failed(self, backfill_id: str) -> int:
        """Makes failed tasks pending again (a resume gives them fresh attempts)."""
        with self._tx() as db:
            cur = db.execute("UPDATE tasks SET status = 'pending', attempts = 0, not_before = 0 "
                             "WHERE backfill_id = ? AND status = 'failed'", (backfill_id,))
            return int(cur.rowcount)

    def live_workers(self, backfill_id: str) -> set[str]:
        """Workers holding an unexpired lease on one of the backfill's tasks (minus dead
        processes on this host)."""
        rows = self._conn().execute("SELECT DISTINCT worker FROM leases WHERE backfill_id = ? "
                                    "AND expires_at >= ?", (backfill_id, time.time())).fetchall()
        return {str(w) for (w,) in rows if not _worker_dead(str(w))}

    # -- audits and publications ---------------------------------------------------------------
    def record_audit(self, backfill_id: str, audit_id: str, created_at: str, created_by: str,
                     models: Sequence[Mapping[str, Any]]) -> None:
        """Records one audit: per model ``model``, ``passed``, ``published_fingerprints``
        (label -> "rows:digest") and ``result`` (the JSON-able audit of the model)."""
        with self._tx() as db:
            db.executemany(
                "INSERT INTO audits (backfill_id, model, created_at, created_by, passed, "
                "published_fingerprints, result) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(backfill_id, m["model"], created_at, created_by, int(bool(m["passed"])),
                  json.dumps(m["published_fingerprints"]),
                  json.dumps({"audit_id": audit_id, **m["result"]}, default=str))
                 for m in models])

    def record_publication(self, backfill_id: str, publication: Mapping[str, Any]) -> None:
        """Records a publication (``published_at``, ``published_by``, ``note``,
        ``forced_reason``, ``publication_id``, ``models``: model -> changed partition labels)
        and marks the backfill published, in one transaction."""
        with self._tx() as db:
            self._set_status(db, backfill_id, BackfillState.PUBLISHED, False)
            db.execute("INSERT INTO publications (backfill_id, published_at, published_by, note, "
                       "forced_reason, models) VALUES (?, ?, ?, ?, ?, ?)",
                       (backfill_id, publication["published_at"], publication["published_by"],
                        publication["note"], publication["forced_reason"],
                        json.dumps({"publication_id": publication["publication_id"],
                                    "models": publication["models"]})))

    def audits(self, backfill_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute("SELECT * FROM audits WHERE backfill_id = ? ORDER BY id",
                                    (backfill_id,)).fetchall()
        return [self._row_dict("audits", r) for r in rows]

    def publications(self, backfill_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM publications" + (" WHERE backfill_id = ?" if backfill_id else "")
        rows = self._conn().execute(sql + " ORDER BY id",
                                    (backfill_id,) if backfill_id else ()).fetchall()
        return [self._row_dict("publications", r) for r in rows]


def _iso(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).isoformat()
    raise InvalidInputError(f"expected a datetime, got {value!r}")


def dumps(value: object) -> str:
    return json.dumps(value, default=str, sort_keys=True)
