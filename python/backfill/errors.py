"""The error vocabulary. Every error backfill raises derives from :class:`BackfillError`.

The C++ core raises these same classes (its exception translator looks them up here), so
``except backfill.BackfillError`` catches everything and ``except ValueError`` catches bad input.
"""

from __future__ import annotations


class BackfillError(Exception):
    """Base class of every backfill error."""


class InvalidInputError(BackfillError, ValueError):
    """A value passed in is malformed or out of range; the message names it."""


class CycleError(InvalidInputError):
    """A dependency graph has a cycle; the message lists the path."""


class NotFoundError(BackfillError, KeyError):
    """A named thing (model, column, backfill id) does not exist."""

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0]) if self.args else ""


class ConflictError(BackfillError, RuntimeError):
    """The state changed under us: a lost lease, a stale audit, a concurrent publish."""


class MissingExtraError(BackfillError, ImportError):
    """A feature needs an optional extra that is not installed; the message names the extra."""


#: Failures of the code itself (ours, a plug-in's, a library's API used wrongly), never of the
#: outside world: they fail the same way every time. A handler meant for a broker, a database or
#: a file lets them through as they are, and they are never retried as transient.
#: (MissingExtraError is an ImportError: a missing extra is not worth a retry either.)
PROGRAMMING_ERRORS: tuple[type[Exception], ...] = (
    AttributeError,
    TypeError,
    NameError,
    ImportError,
    AssertionError,
    NotImplementedError,
)

__all__ = [
    "PROGRAMMING_ERRORS",
    "BackfillError",
    "ConflictError",
    "CycleError",
    "InvalidInputError",
    "MissingExtraError",
    "NotFoundError",
]
