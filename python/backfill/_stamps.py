"""Who acts and when: the stamps recorded with backfills, audits, publications and ledger rows.

A base module (it imports no stage), so that every stage stamps its records the same way.
"""

from __future__ import annotations

import datetime as dt
import getpass

__all__ = ["stamp_ms", "utcnow", "who"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def utcnow() -> str:
    """Now, in UTC, as ISO 8601 with milliseconds (how the ledger stamps rows)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def stamp_ms(ms: int) -> str:
    """The stamp of ``ms`` milliseconds since the epoch (exact: no float on the way)."""
    return (_EPOCH + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")


def who() -> str:
    """Who is acting (the OS user), recorded with backfills, audits and publications."""
    try:
        return getpass.getuser()
    # No login name in the environment and no user database entry (some containers): KeyError
    # from pwd before Python 3.13, OSError since; ImportError where there is no pwd module.
    except (OSError, KeyError, ImportError):  # pragma: no cover
        return "unknown"
