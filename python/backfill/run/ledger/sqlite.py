"""The SQLite ledger: one file (under the project's ``.backfill/``) recording every backfill,
task, attempt, lease, audit and publication.

Several runner processes (Airflow workers on one machine, say) share one file. Every write is one
``BEGIN IMMEDIATE`` transaction, so writers take turns. A task is claimed together with a lease
that expires; a worker renews its leases while its tasks run. A lease whose worker is gone
(expired, or a dead process on this host) is dropped at the next claim, and its task is claimed
again. So a task never runs twice at once, and a killed worker's task is picked up again.

The operations are :class:`~.sql.SqlLedger`'s; this module holds what is SQLite's own: a
connection per thread (every one closed), the write transaction, the clock (this process's:
one machine), the table rebuild a CHECK change needs, and ``sqlite3`` errors as
:class:`~.records.LedgerError` (saying when the file is read-only).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..._stamps import stamp_ms
from .records import LedgerError
from .schema import SQLITE, AllowValues, values_text
from .sql import Db, SqlLedger, WriteMode

__all__ = ["Ledger", "SqliteLedger", "read_only"]

R = TypeVar("R")


def _close_connections(
    opened: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]],
    lock: threading.Lock | None,
    *,
    only_finished: bool,
) -> None:
    """Closes the connections in ``opened`` (all, or with ``only_finished`` only those whose
    thread has finished) and forgets them; takes ``lock`` when given (the finalizer's call)."""
    # Not a conditional expression: mypy before 1.11 joins its two branches to `object`.
    guard: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if lock is not None:
        guard = lock
    with guard:
        keep = []
        for thread_ref, conn in opened:
            thread = thread_ref()
            if only_finished and thread is not None and thread.is_alive():
                keep.append((thread_ref, conn))
            else:
                conn.close()
        opened[:] = keep


class SqliteLedger(SqlLedger):
    """The SQLite ledger at ``path`` (created on first use). Safe across threads (a connection
    per thread) and processes (SQLite's locking; on one machine, not over network file systems).
    Implements :class:`~.backend.LedgerBackend`."""

    dialect = SQLITE

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.where = str(self.path)
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write("opening", lambda db, _: self._prepare(db))
        except BaseException:
            # Re-raised as it is: only the connection is let go. A refused file (newer
            # version, not a ledger) is not held open; on success the connection stays.
            self.close()
            raise

    def __repr__(self) -> str:
        return f"SqliteLedger({str(self.path)!r})"

    @staticmethod
    def for_project_path(state_dir: str | Path) -> Path:
        return Path(state_dir) / "ledger.sqlite"

    @classmethod
    def for_project(cls, state_dir: str | Path) -> SqliteLedger:
        return cls(cls.for_project_path(state_dir))

    # -- connections and transactions ----------------------------------------------------------
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

    def _read(self, what: str, fn: Callable[[Db], R]) -> R:
        try:
            return fn(self._conn())
        except sqlite3.Error as exc:
            raise self._storage_error(what, exc) from exc

    def _run_write(self, what: str, fn: Callable[[Db, bool], R], mode: WriteMode) -> R:
        # BEGIN IMMEDIATE even for one statement: writers queue on the busy timeout up front
        try:
            with self._tx(durable=mode.durable) as db:
                return fn(db, False)  # a failed write is never retried here
        except sqlite3.Error as exc:
            raise self._storage_error(what, exc) from exc

    def _clock(self, secs: float | None) -> dict[str, Any]:
        # One reading for all the words. ``:now`` and ``:epoch`` are the same instant cut to the
        # millisecond the stamps show: a retry is due at ``:epoch`` + its delay from the end's
        # stamp, and a claim compares that with the instant its own stamp records, so the
        # recorded gap is never under the delay.
        ns = time.time_ns()
        now = ns / 1e9
        ms = ns // 1_000_000
        clock: dict[str, Any] = {"now": stamp_ms(ms), "clock": now, "epoch": ms / 1000}
        if secs is not None:
            clock["expires"] = now + secs
        return clock

    def close(self) -> None:
        """Closes every connection of this ledger, of every thread; a later call reopens."""
        try:
            with self._opened_lock:
                _close_connections(self._opened, None, only_finished=False)
        except sqlite3.Error as exc:
            raise self._storage_error("closing", exc) from exc
        self._local = threading.local()

    # -- schema --------------------------------------------------------------------------------
    def _has_table(self, db: Db, name: str) -> bool:
        found = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        return found is not None

    def _allow_values(self, db: Db, step: AllowValues) -> None:
        """SQLite cannot change a CHECK constraint in place: the table is rebuilt from its
        stored definition with only the CHECK's list of values changed (foreign keys are not
        enforced on these connections, and the other tables name it by name)."""
        (ddl,) = db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (step.table,)
        ).fetchone()
        old, new = values_text(step.before), values_text(step.after)
        if old not in ddl:  # pragma: no cover - every ledger of the version before has it
            raise LedgerError(
                f"ledger {self.path}: the {step.table} table lacks the {step.column} CHECK of "
                "the version before; cannot migrate"
            )
        table, rebuilt = step.table, f"{step.table}_rebuilt"
        cols = ", ".join(f'"{r[1]}"' for r in db.execute(f"PRAGMA table_info({table})"))
        db.execute(ddl.replace(old, new).replace(table, rebuilt, 1))
        db.execute(f"INSERT INTO {rebuilt} ({cols}) SELECT {cols} FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {rebuilt} RENAME TO {table}")

    # -- errors --------------------------------------------------------------------------------
    def _storage_error(self, what: str, exc: sqlite3.Error) -> LedgerError:
        """``exc`` as a :class:`LedgerError` saying which ledger and what failed (callers handle
        the project's errors, not a driver's)."""
        why = read_only(self.path) if _write_refused(exc) else None
        if why is not None:
            return LedgerError(
                f"ledger {self.path}: {what} failed: {why}; backfill records every task "
                "in its ledger, so it must be writable (SQLite also writes "
                f"{self.path.name}-wal and -shm beside it). Make it writable (or pass "
                "--ledger to another), then run the command again; nothing was changed "
                f"(SQLite said: {exc})"
            )
        hint = (
            " (another process held the ledger longer than the busy timeout)"
            if "locked" in str(exc) or "busy" in str(exc)
            else ""
        )
        return LedgerError(f"ledger {self.path}: {what} failed: {exc}{hint}")


#: The name this backend had before it was called what it is; kept because ``backfill.Ledger``
#: is public API (``backfill.Ledger(path)`` opens a SQLite ledger).
Ledger = SqliteLedger


def _write_refused(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "readonly" in text or "read-only" in text or "unable to open" in text


def read_only(path: Path) -> str | None:
    """Why the ledger at ``path`` cannot be written (its file system, directory or file), or
    None. ``os.access`` reports a read-only file system even to root."""
    folder = path.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"it is on a read-only file system ({folder})"
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return f"its directory {folder} is read-only"
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if name.exists() and not os.access(name, os.W_OK):
            return f"{name} is read-only"
    return None
