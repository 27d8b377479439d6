"""PostgreSQL connections shared by the Postgres ledger and the Postgres engine: connection
pools (one per process, database and settings, shared by the handles open on it), driver errors
as text with their secrets masked, and which errors may pass on a retry.

A base module: it imports no stage (import-linter's ``base`` contract), only psycopg and
:mod:`backfill._secrets`. psycopg is the ``postgres`` extra, so only the modules that need
Postgres import this one.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ._secrets import mask_text

__all__ = [
    "TRANSIENT_STATES",
    "Pool",
    "PoolSpec",
    "acquire_pool",
    "is_connection_lost",
    "is_transient",
    "open_pool",
    "reason",
    "release_pool",
]

Pool = ConnectionPool[psycopg.Connection[Any]]

# SQLSTATE classes and codes of failures that may pass on a retry: serialization failures and
# deadlocks (40), lock timeouts (55P03), a server shutting down or not yet accepting connections
# (57P0x), connection exceptions (08), too many connections (53300).
TRANSIENT_STATES = ("40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300", "53400")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (from psycopg or the pool) may pass on a retry of the same statement."""
    if isinstance(exc, PoolTimeout):
        return True
    state = getattr(exc, "sqlstate", None)
    if state is None:  # no server answer: the connection was lost or never made
        return isinstance(exc, psycopg.OperationalError)
    return state in TRANSIENT_STATES or state.startswith(("08", "57P"))


def is_connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is a lost (or not yet made) connection, a server restarting, a deadlock:
    psycopg's OperationalError, which the ledger retries whole operations on."""
    return isinstance(exc, psycopg.OperationalError)


def reason(exc: BaseException, url: str = "", *, lines: int | None = None) -> str:
    """``exc``'s text (its first ``lines`` lines, joined by ``; ``; all of it when None) with
    the secrets of ``url`` (and any other) masked: a driver may quote the connection string it
    could not use."""
    text = str(exc).strip()
    if lines is not None:
        kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
        text = "; ".join(kept[:lines])
    return mask_text(text, urls=(url,) if url else ()) or type(exc).__name__


@dataclass(frozen=True)
class PoolSpec:
    """What a pool connects to and how: ``kwargs`` go to every connection (``options``,
    ``connect_timeout``...), ``configure`` runs on each new one."""

    conninfo: str
    name: str
    max_size: int
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    min_size: int = 1
    timeout: float = 10.0
    configure: Callable[[psycopg.Connection[Any]], None] | None = None

    def key(self) -> tuple[Any, ...]:
        """Equal for equal settings, in this process (a forked child gets its own pools)."""
        return (
            os.getpid(),
            self.conninfo,
            self.name,
            self.max_size,
            self.min_size,
            self.timeout,
            self.configure,
            repr(sorted(self.kwargs.items())),
        )


def open_pool(spec: PoolSpec) -> Pool:
    """A new pool of ``spec``, its connections made in the background (the caller closes it;
    :func:`acquire_pool` for one shared by the handles of a process)."""
    pool: Pool = ConnectionPool(
        spec.conninfo,
        kwargs=dict(spec.kwargs),
        min_size=spec.min_size,
        max_size=spec.max_size,
        open=False,
        configure=spec.configure,
        timeout=spec.timeout,
        name=f"{spec.name}-{os.getpid()}",
    )
    pool.open(wait=False)
    return pool


# One pool per (process, database, settings), shared by the handles open on it and closed when
# the last one releases it (or at exit). A handle that is never closed keeps its pool referenced
# here: a pool collected as garbage would close itself from whichever thread the collector ran
# in, possibly one of its own (which cannot join itself). A forked child gets its own pools (the
# key holds the pid): it must not share the parent's sockets.
_POOLS: dict[tuple[Any, ...], tuple[Pool, int]] = {}
_POOLS_LOCK = threading.Lock()


def acquire_pool(spec: PoolSpec) -> Pool:
    """The pool of ``spec`` shared by this process's handles (opened on first use); release
    it with :func:`release_pool`."""
    key = spec.key()
    with _POOLS_LOCK:
        pool, users = _POOLS.get(key, (None, 0))
        if pool is None or pool.closed:
            pool, users = open_pool(spec), 0
        _POOLS[key] = (pool, users + 1)
        return pool


def release_pool(pool: Pool) -> None:
    """Gives back one use of ``pool``; the last closes it."""
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
        mine = [p for key, (p, _) in _POOLS.items() if key[0] == os.getpid()]
        _POOLS.clear()
    for pool in mine:
        pool.close()
