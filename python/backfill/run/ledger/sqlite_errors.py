"""``sqlite3`` errors of the SQLite ledger as the project's :class:`~.records.LedgerError`."""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from .records import LedgerError

__all__ = ["read_only", "storage_errors"]

P = ParamSpec("P")
R = TypeVar("R")


class _HasPath(Protocol):
    path: Path


S = TypeVar("S", bound=_HasPath)


def storage_errors(
    what: str,
) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Turns ``sqlite3`` errors of the decorated method into :class:`LedgerError` saying which
    ledger and what failed (callers handle the project's errors, not a driver's)."""

    def wrap(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        def guarded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(self, *args, **kwargs)
            except sqlite3.Error as exc:
                why = read_only(self.path) if _write_refused(exc) else None
                if why is not None:
                    raise LedgerError(
                        f"ledger {self.path}: {what} failed: {why}; backfill records every task "
                        "in its ledger, so it must be writable (SQLite also writes "
                        f"{self.path.name}-wal and -shm beside it). Make it writable (or pass "
                        "--ledger to another), then run the command again; nothing was changed "
                        f"(SQLite said: {exc})"
                    ) from exc
                hint = (
                    " (another process held the ledger longer than the busy timeout)"
                    if "locked" in str(exc) or "busy" in str(exc)
                    else ""
                )
                raise LedgerError(f"ledger {self.path}: {what} failed: {exc}{hint}") from exc

        functools.update_wrapper(guarded, fn)
        return guarded

    return wrap


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
