"""``sqlite3`` errors of the SQLite ledger as the project's :class:`~.records.LedgerError`."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from .records import LedgerError

__all__ = ["storage_errors"]

P = ParamSpec("P")
R = TypeVar("R")


class _HasPath(Protocol):
    path: Path


S = TypeVar("S", bound=_HasPath)


def storage_errors(what: str) -> Callable[[Callable[Concatenate[S, P], R]],
                                          Callable[Concatenate[S, P], R]]:
    """Turns ``sqlite3`` errors of the decorated method into :class:`LedgerError` saying which
    ledger and what failed (callers handle the project's errors, not a driver's)."""
    def wrap(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        def guarded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(self, *args, **kwargs)
            except sqlite3.Error as exc:
                hint = (" (another process held the ledger longer than the busy timeout)"
                        if "locked" in str(exc) or "busy" in str(exc) else "")
                raise LedgerError(f"ledger {self.path}: {what} failed: {exc}{hint}") from exc
        functools.update_wrapper(guarded, fn)
        return guarded
    return wrap
