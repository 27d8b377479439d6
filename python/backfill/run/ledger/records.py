"""What every ledger backend hands out and raises, independent of how it stores them.

:class:`TaskRow` and :class:`Claim` are the records callers get; :func:`utcnow` and
:func:`new_worker_id` make the stamps and worker ids every backend stores; :func:`worker_dead`
tells a dead worker on this host from its id. The errors are the project's own
(:mod:`backfill.errors`), so callers never see a driver's exception.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._stamps import utcnow
from ...errors import BackfillError, ConflictError, InvalidInputError

__all__ = [
    "AUDIT_KEYS",
    "BACKFILL_KEYS",
    "PUBLICATION_KEYS",
    "TASK_KEYS",
    "BackfillCancelledError",
    "BackfillExistsError",
    "BackfillHeldError",
    "BackfillPausedError",
    "Claim",
    "LedgerError",
    "TaskBusyError",
    "TaskRow",
    "check_backfill_input",
    "iso_utc",
    "new_worker_id",
    "require_keys",
    "task_row",
    "utcnow",
    "worker_dead",
]

# What the protocol's mappings carry (see LedgerBackend); every backend checks them alike.
BACKFILL_KEYS = (
    "id",
    "project",
    "project_root",
    "selection",
    "exclude",
    "start",
    "end",
    "as_of",
    "reason",
    "mode",
    "engine",
    "plan",
    "models",
    "created_by",
)
#: optional in a backfill record: run options (JSON text: windows, budget, costs) or None
OPTIONAL_BACKFILL_KEYS = ("options",)
TASK_KEYS = ("task_id", "model", "start", "end", "label", "partitions", "wave", "depends_on")
AUDIT_KEYS = ("model", "passed", "published_fingerprints", "result")
PUBLICATION_KEYS = (
    "publication_id",
    "published_at",
    "published_by",
    "note",
    "forced_reason",
    "models",
)


class LedgerError(BackfillError):
    """The ledger's storage failed (locked beyond the busy timeout, disk I/O, a file written by a
    newer version); the message names the ledger and what failed."""


class TaskBusyError(ConflictError):
    """The task is running in another live worker (its lease is held); try again later."""


class BackfillHeldError(ConflictError):
    """The backfill is paused or cancelled: nothing of it may be claimed now."""


class BackfillPausedError(BackfillHeldError):
    """The backfill is paused: nothing of it is claimed until ``backfill resume``; try later."""


class BackfillCancelledError(BackfillHeldError):
    """The backfill is cancelled: nothing more of it runs, is audited or published."""


class BackfillExistsError(ConflictError):
    """A backfill with that id is recorded already."""


@dataclass(frozen=True)
class TaskRow:
    """One task of a backfill as the ledger holds it (``status`` is a
    :class:`~backfill.run.ledger.states.TaskState` value)."""

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
    """A task leased to one worker: ``attempt`` is its 1-based attempt number and
    ``attempt_id`` identifies the attempt (and so the lease) that ``finish`` ends."""

    task: TaskRow
    attempt: int
    attempt_id: int


def task_row(r: Sequence[Any], deps: Sequence[int] = ()) -> TaskRow:
    """A :class:`TaskRow` from the stored columns ``task_id, model, start, end, label,
    partitions, wave, status, attempts, rows_written, fingerprint, error`` (bounds as ISO
    text), in that order."""

    def ts(value: str | None) -> dt.datetime | None:
        return None if value is None else dt.datetime.fromisoformat(value)

    return TaskRow(
        r[0],
        r[1],
        ts(r[2]),
        ts(r[3]),
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        r[9],
        r[10],
        r[11],
        tuple(sorted(deps)),
    )


def new_worker_id() -> str:
    """``host:pid:token`` — the host and pid let a worker on the same host see a dead one."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def worker_dead(worker: str) -> bool:
    """True when ``worker`` (a :func:`new_worker_id`) is a process of this host that is gone.
    A worker on another host is never known dead here: only its lease's expiry tells."""
    host, _, rest = worker.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except (ProcessLookupError, OverflowError):  # no such process (none can have that pid)
        return True
    except PermissionError:  # alive, under another user
        return False
    return False


def require_keys(mapping: Mapping[str, Any], keys: Sequence[str], what: str) -> None:
    """InvalidInputError naming the keys ``mapping`` lacks (a caller's bug, said plainly rather
    than as a database binding error)."""
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise InvalidInputError(
            f"{what} lacks {', '.join(missing)} (expected keys: {', '.join(keys)})"
        )


def check_backfill_input(record: Mapping[str, Any], tasks: Sequence[Mapping[str, Any]]) -> None:
    """Checks a ``create_backfill`` call before anything is written: the keys, unique task ids,
    and dependencies among the backfill's own tasks."""
    require_keys(record, BACKFILL_KEYS, "backfill record")
    ids: set[int] = set()
    for t in tasks:
        require_keys(t, TASK_KEYS, f"task {t.get('task_id')!r} of backfill {record['id']}")
        if t["task_id"] in ids:
            raise InvalidInputError(
                f"backfill {record['id']}: task id {t['task_id']!r} appears "
                "twice; expected unique task ids"
            )
        ids.add(t["task_id"])
    unknown = sorted({d for t in tasks for d in t["depends_on"] if d not in ids})
    if unknown:
        raise InvalidInputError(
            f"backfill {record['id']}: tasks depend on task ids {unknown} "
            "that are not among its tasks"
        )


def iso_utc(value: object) -> str | None:
    """A task bound as stored: ISO 8601 in UTC (None stays None)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).isoformat()
    raise InvalidInputError(f"task bound {value!r}: expected a datetime or None")
