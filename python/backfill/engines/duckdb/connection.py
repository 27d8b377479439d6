"""One process-wide handle on a DuckDB database file.

DuckDB lets one process open a database file for writing at a time (threads of that process share
it, with optimistic concurrency between their transactions). So the engine holds the file only
while it works: the first user of a process opens it, the last one closes it (after a short
linger), and another process waiting for the lock retries with backoff for up to
``lock_timeout`` seconds.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb

from ..base import TaskFailure
from ..sql.connection import InUse

log = logging.getLogger(__name__)

__all__ = ["SharedDatabase"]


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("Could not set lock" in text or "Conflicting lock" in text)


class SharedDatabase:
    """One process-wide handle on the file, opened by the first user and closed by the last."""

    def __init__(self, path: Path, lock_timeout: float, keep_open: bool, linger: float) -> None:
        self.path = path
        self.lock_timeout = lock_timeout
        self.keep_open = keep_open
        self.linger = linger
        self._mutex = threading.Lock()
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._users = 0
        self._in_use: InUse[duckdb.DuckDBPyConnection] = InUse()  # cursors (interrupt them)
        # The lingering close: one closer thread per open file, woken by each release (a
        # threading.Timer per release cost a thread start per task: ~8% of a one-day task).
        self._idle = threading.Condition(self._mutex)
        self._close_at: float | None = None
        self._closer: threading.Thread | None = None

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
                        raise TaskFailure(
                            f"{self.path} stayed locked by another process for "
                            f"{self.lock_timeout:g} s (engine lock_timeout); only one process "
                            "may write a DuckDB file. Close the other process (DuckDB names its "
                            "PID below: a notebook, a BI tool, another runner) or raise "
                            "lock_timeout in backfill.yml's engine settings, then resume the "
                            f"backfill (backfill run --resume ID). DuckDB said: {exc}",
                            transient=True,
                        ) from None
                    raise
                if not warned and time.monotonic() > deadline - self.lock_timeout + 2.0:
                    log.warning(
                        "waiting up to %.0f s for %s, held by another process: %s",
                        self.lock_timeout,
                        self.path,
                        exc,
                    )
                    warned = True
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)

    @contextlib.contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of its own on the file (opened by the first user), held until the block
        ends."""
        with self._mutex:
            if self._conn is None:
                self._conn = self._open()
            self._users += 1
            cur = self._conn.cursor()
        try:
            with self._in_use.lent(cur):
                yield cur
        finally:
            cur.close()
            with self._mutex:
                self._users -= 1
                if self._users == 0 and not self.keep_open and self._conn is not None:
                    # Linger briefly: the runner's next task usually follows within
                    # milliseconds; another process waits at most `linger` longer.
                    self._close_at = time.monotonic() + self.linger
                    if self._closer is None:
                        self._closer = threading.Thread(
                            target=self._close_when_idle, daemon=True, name="duckdb-linger"
                        )
                        self._closer.start()
                    else:
                        self._idle.notify()

    def interrupt(self) -> None:
        """Interrupts the statement each cursor in use runs now (it raises InterruptException;
        its transaction rolls back)."""
        self._in_use.interrupt(lambda cur: cur.interrupt(), (duckdb.Error,))

    def _close_when_idle(self) -> None:
        """Closes the file once it has been idle for ``linger`` seconds since the last release;
        ends with the close (or when someone else closed it)."""
        with self._idle:
            while self._conn is not None:
                if self._close_at is None or self._users > 0:
                    self._close_at = None
                    self._idle.wait()  # until the next release
                    continue
                delay = self._close_at - time.monotonic()
                if delay > 0:
                    self._idle.wait(delay)
                    continue
                self._conn.close()
                self._conn = None
            self._close_at = None
            self._closer = None

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None and self._users == 0:
                self._conn.close()
                self._conn = None
                self._idle.notify()  # the closer, if waiting, ends
