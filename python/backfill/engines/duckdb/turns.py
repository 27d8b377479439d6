"""Writers of one DuckDB database taking turns on a table or on one period of it.

DuckDB's transactions conflict optimistically: two that delete the same rows conflict, and the
engine core retries the one that lost. Two writes of one period that both find it empty (two
runs of one task at once: a worker whose lease ran out and the one that took the task over)
delete nothing, so nothing conflicts, and both insert: the period holds its rows twice. Only
this process can write the database (DuckDB locks the file), so a lock of the process makes
them take turns, as PostgreSQL's advisory locks do there.

A lock is held from :meth:`Turns.take` to the end of the taking thread's transaction
(:meth:`Turns.held_until_done`), re-entrant within it. A transaction that had to wait for it
must start again: DuckDB's snapshot is its transaction's, taken before the wait, so it would
not see what the other write committed (its DELETE would still find the period empty).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["Turns"]

_GUARD = threading.Lock()
# (database, name) -> its lock; never shrinks: a name is a table or one of its periods, few
_LOCKS: dict[tuple[str, str], threading.Lock] = {}


class Turns:
    """The turn locks of one database (``database``: its file's resolved path, or a name
    unique to an in-memory database)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self._held = threading.local()

    def _mine(self) -> list[threading.Lock]:
        held: list[threading.Lock] | None = getattr(self._held, "locks", None)
        if held is None:
            held = self._held.locks = []
        return held

    def take(self, name: str) -> bool:
        """Takes the lock ``name`` (waiting for it) and holds it until this thread's transaction
        ends; whether it had to wait (then the transaction must start again)."""
        with _GUARD:
            lock = _LOCKS.setdefault((self.database, name), threading.Lock())
        mine = self._mine()
        if lock in mine:
            return False
        waited = not lock.acquire(blocking=False)
        if waited:
            lock.acquire()
        mine.append(lock)
        return waited

    @contextlib.contextmanager
    def held_until_done(self) -> Iterator[None]:
        """Releases the locks this thread takes inside the block when the block ends."""
        mine = self._mine()
        before = len(mine)
        try:
            yield
        finally:
            while len(mine) > before:
                mine.pop().release()
