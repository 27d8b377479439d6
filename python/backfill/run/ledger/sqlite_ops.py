"""The SQLite ledger's operator controls: pause, resume from a pause, cancel, run options and the
ready tasks a window- or budget-bound runner chooses from (see :class:`~.backend.LedgerBackend`).

A mixin of :class:`~.sqlite.Ledger` (kept apart so each module stays one subject). Every write is
one ``BEGIN IMMEDIATE`` transaction whose guarded UPDATE checks the state it changes, so a pause
and a claim in two processes take turns: a claim after the pause claims nothing.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError, NotFoundError
from .records import (
    BackfillCancelledError,
    BackfillHeldError,
    BackfillPausedError,
    TaskRow,
    task_row,
    utcnow,
)
from .sqlite_errors import storage_errors as _storage
from .states import (
    BACKFILL_TRANSITIONS,
    PAUSABLE,
    BackfillState,
    IllegalTransitionError,
    TaskState,
    check_backfill_transition,
    check_pausable,
    sources,
)

__all__ = ["SqliteOps", "held_error", "held_message"]

_TASK_COLUMNS = (
    "task_id, model, start, end, label, partitions, wave, status, attempts, "
    "rows_written, fingerprint, error"
)


def held_error(
    backfill_id: str, status: str, paused_at: object | None, paused_by: str | None
) -> BackfillHeldError | None:
    """The error saying why nothing of the backfill may be claimed now, or None. Its class tells
    a caller whether to wait (paused) or give up (cancelled)."""
    if status == BackfillState.CANCELLED:
        return BackfillCancelledError(
            f"backfill {backfill_id} is cancelled; nothing more of it runs"
        )
    if paused_at is not None:
        return BackfillPausedError(
            f"backfill {backfill_id} is paused (by {paused_by} at "
            f"{str(paused_at)[:19]}); resume it with: backfill resume "
            f"{backfill_id}"
        )
    return None


def held_message(
    backfill_id: str, status: str, paused_at: object | None, paused_by: str | None
) -> str | None:
    """Why nothing of the backfill may be claimed now, or None."""
    error = held_error(backfill_id, status, paused_at, paused_by)
    return None if error is None else str(error)


class SqliteOps:
    """Pause, cancel, options and ready tasks on the SQLite ledger (mixed into ``Ledger``)."""

    path: Path

    def _tx(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # pragma: no cover - Ledger's is used

    def _conn(self) -> sqlite3.Connection:  # pragma: no cover - Ledger's is used
        raise NotImplementedError

    def _not_found(self, db: sqlite3.Connection, backfill_id: str) -> NotFoundError:
        raise NotImplementedError  # pragma: no cover - Ledger's is used

    def _hold(self, db: sqlite3.Connection, backfill_id: str) -> tuple[str, str | None, str | None]:
        row = db.execute(
            "SELECT status, paused_at, paused_by FROM backfills WHERE id = ?", (backfill_id,)
        ).fetchone()
        if row is None:
            raise self._not_found(db, backfill_id)
        return str(row[0]), row[1], row[2]

    def _held(self, db: sqlite3.Connection, backfill_id: str) -> str | None:
        return held_message(backfill_id, *self._hold(db, backfill_id))

    @_storage("pausing or resuming a backfill")
    def set_paused(self, backfill_id: str, paused: bool, by: str) -> None:
        states = [s.value for s in PAUSABLE] if paused else []
        guard = (
            "paused_at IS NULL AND status IN (" + ", ".join("?" for _ in states) + ")"
            if paused
            else "paused_at IS NOT NULL"
        )
        with self._tx() as db:
            cur = db.execute(
                f"UPDATE backfills SET paused_at = ?, paused_by = ?, updated_at = ? "
                f"WHERE id = ? AND {guard}",
                (
                    utcnow() if paused else None,
                    by if paused else None,
                    utcnow(),
                    backfill_id,
                    *states,
                ),
            )
            if cur.rowcount != 1:
                status, paused_at, _ = self._hold(db, backfill_id)
                check_pausable(backfill_id, status, paused_at is not None, paused)

    @_storage("cancelling a backfill")
    def cancel(self, backfill_id: str, reason: str, by: str) -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInputError(
                f"cancelling backfill {backfill_id} needs a reason (who "
                "reads its record will ask), e.g. reason='wrong period'"
            )
        froms = sources(BACKFILL_TRANSITIONS, BackfillState.CANCELLED)
        marks = ", ".join("?" for _ in froms)
        with self._tx() as db:
            cur = db.execute(
                f"UPDATE backfills SET status = ?, cancel_reason = ?, "
                f"cancelled_by = ?, paused_at = NULL, paused_by = NULL, "
                f"updated_at = ?, finished_at = ? WHERE id = ? AND status IN "
                f"({marks})",
                (
                    BackfillState.CANCELLED.value,
                    reason.strip(),
                    by,
                    utcnow(),
                    utcnow(),
                    backfill_id,
                    *[s.value for s in froms],
                ),
            )
            if cur.rowcount != 1:
                status = self._hold(db, backfill_id)[0]
                if status == BackfillState.CANCELLED:
                    raise IllegalTransitionError(f"backfill {backfill_id} is cancelled already")
                check_backfill_transition(backfill_id, status, BackfillState.CANCELLED.value)

    @_storage("recording run options")
    def set_options(self, backfill_id: str, options: Mapping[str, Any]) -> None:
        text = json.dumps(dict(options), sort_keys=True)
        with self._tx() as db:
            if (
                db.execute(
                    "UPDATE backfills SET options = ?, updated_at = ? WHERE id = ?",
                    (text, utcnow(), backfill_id),
                ).rowcount
                != 1
            ):
                raise self._not_found(db, backfill_id)

    @_storage("listing ready tasks")
    def ready(self, backfill_id: str, limit: int) -> list[TaskRow]:
        if limit <= 0:
            return []
        db = self._conn()
        if self._held(db, backfill_id):
            return []
        rows = db.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks t WHERE t.backfill_id = ? AND t.status = ? "
            "AND t.not_before <= ? AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p "
            "ON p.backfill_id = d.backfill_id AND p.task_id = d.dep_id WHERE "
            "d.backfill_id = t.backfill_id AND d.task_id = t.task_id AND p.status != ?) "
            "ORDER BY t.wave, t.task_id LIMIT ?",
            (backfill_id, TaskState.PENDING.value, time.time(), TaskState.DONE.value, limit),
        ).fetchall()
        return [task_row(r) for r in rows]

    def _refuse_held(self, db: sqlite3.Connection, backfill_id: str) -> None:
        """For ``claim_task``: BackfillHeldError while the backfill is paused or cancelled."""
        error = held_error(backfill_id, *self._hold(db, backfill_id))
        if error is not None:
            raise error
