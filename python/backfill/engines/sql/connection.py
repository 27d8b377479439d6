"""What the SQL engines' connections share: the :class:`Database` an engine core talks to, and
the :class:`InUse` set through which :meth:`Database.interrupt` reaches the statements running.

An engine's database object (DuckDB's one shared file handle, Postgres's pool) lends out a
handle per block of work -- a cursor, a pooled connection -- and must be able to stop what the
handles lent out are running, from another thread (a runner that is told to stop). Keeping the
handles in use is the same for every driver; only how one is stopped differs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Database", "InUse"]

H = TypeVar("H")


class Database(Protocol):
    """The connection side of a SQL engine (see :class:`~.core.SqlEngine`'s ``db``)."""

    def connection(self) -> contextlib.AbstractContextManager[Any]:
        """A handle whose ``execute(sql)`` returns rows (``fetchall``/``fetchone``), lent
        until the block ends."""
        ...

    def interrupt(self) -> None:
        """Stops the statement each handle lent out runs now (from any thread)."""
        ...

    def close(self) -> None:
        """Releases what the database holds (it opens again on next use)."""
        ...


class InUse(Generic[H]):
    """The handles lent out now, so that another thread can stop their statements."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handles: set[H] = set()

    @contextlib.contextmanager
    def lent(self, handle: H) -> Iterator[H]:
        """``handle`` counts as in use until the block ends."""
        with self._lock:
            self._handles.add(handle)
        try:
            yield handle
        finally:
            with self._lock:
                self._handles.discard(handle)

    def interrupt(self, stop: Callable[[H], object], closed: tuple[type[Exception], ...]) -> None:
        """Calls ``stop`` on each handle in use now. A handle between statements is not
        stopped (callers repeat until their tasks end); one that raises ``closed`` was closed
        meanwhile: nothing left to stop."""
        with self._lock:
            handles = list(self._handles)
        for handle in handles:
            with contextlib.suppress(*closed):
                stop(handle)
