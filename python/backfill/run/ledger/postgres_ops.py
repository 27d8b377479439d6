"""The Postgres ledger's operator controls: pause, resume from a pause, cancel, run options, the
ready tasks a window- or budget-bound runner chooses from, and overlapping backfills (see
:class:`~.backend.LedgerBackend`).

A mixin of :class:`~.postgres.PostgresLedger`. Pause and cancel are guarded UPDATEs of the
backfill's row; claims read that row in the same statement (``claim``) or lock it ``FOR SHARE``
(``claim_task``), so a claim that starts after a pause committed claims nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg

from ...errors import InvalidInputError, NotFoundError
from . import postgres_sql as q
from .overlap import OPEN_ROWS_SQL, Overlap, find_overlaps
from .postgres_schema import NOW
from .records import TaskRow, task_row
from .sqlite_ops import held_error, held_message
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

__all__ = ["PostgresOps"]

R = TypeVar("R")
Conn = psycopg.Connection[tuple[Any, ...]]

_READY = f"""
SELECT {q.TASK_COLUMNS} FROM tasks t
WHERE t.backfill_id = %(b)s AND t.status = '{TaskState.PENDING.value}'
    AND t.not_before <= extract(epoch FROM clock_timestamp())
    AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p
                    ON p.backfill_id = d.backfill_id AND p.task_id = d.dep_id
                    WHERE d.backfill_id = t.backfill_id AND d.task_id = t.task_id
                        AND p.status <> '{TaskState.DONE.value}')
ORDER BY t.wave, t.task_id LIMIT %(n)s""".encode()


class PostgresOps:
    """Pause, cancel, options and ready tasks on the Postgres ledger (mixed into
    ``PostgresLedger``)."""

    def _do(self, what: str, fn: Callable[[Conn, bool], R]) -> R:
        raise NotImplementedError  # pragma: no cover - PostgresLedger's is used

    def _not_found(self, db: Conn, backfill_id: str) -> NotFoundError:
        raise NotImplementedError  # pragma: no cover - PostgresLedger's is used

    def _hold(
        self, db: Conn, backfill_id: str, lock: bool = False
    ) -> tuple[str, str | None, str | None]:
        row = db.execute(
            "SELECT status, paused_at, paused_by FROM backfills WHERE id = %s"
            + (" FOR SHARE" if lock else ""),
            (backfill_id,),
        ).fetchone()
        if row is None:
            raise self._not_found(db, backfill_id)
        return str(row[0]), row[1], row[2]

    def _refuse_held(self, db: Conn, backfill_id: str) -> None:
        """For ``claim_task`` (inside its transaction): BackfillHeldError while the backfill is
        paused or cancelled; the row stays share-locked, so a pause waits for this claim."""
        error = held_error(backfill_id, *self._hold(db, backfill_id, lock=True))
        if error is not None:
            raise error

    def set_paused(self, backfill_id: str, paused: bool, by: str) -> None:
        states = [s.value for s in PAUSABLE]
        sql = (
            f"UPDATE backfills SET paused_at = {NOW}, paused_by = %s, updated_at = {NOW} "
            "WHERE id = %s AND paused_at IS NULL AND status = ANY(%s)"
            if paused
            else f"UPDATE backfills SET paused_at = NULL, paused_by = NULL, updated_at = {NOW} "
            "WHERE id = %s AND paused_at IS NOT NULL"
        )

        def run(db: Conn, retried: bool) -> None:
            with db.transaction():
                cur = db.execute(
                    sql.encode(), (by, backfill_id, states) if paused else (backfill_id,)
                )
                if cur.rowcount == 1:
                    return
                status, paused_at, _ = self._hold(db, backfill_id)
                if retried and (paused_at is not None) == paused:
                    return  # the earlier try committed
                check_pausable(backfill_id, status, paused_at is not None, paused)

        self._do("pausing or resuming a backfill", run)

    def cancel(self, backfill_id: str, reason: str, by: str) -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInputError(
                f"cancelling backfill {backfill_id} needs a reason (who "
                "reads its record will ask), e.g. reason='wrong period'"
            )
        froms = [s.value for s in sources(BACKFILL_TRANSITIONS, BackfillState.CANCELLED)]

        def run(db: Conn, retried: bool) -> None:
            with db.transaction():
                cur = db.execute(
                    f"UPDATE backfills SET status = %s, cancel_reason = %s, cancelled_by = %s, "
                    f"paused_at = NULL, paused_by = NULL, updated_at = {NOW}, "
                    f"finished_at = {NOW} WHERE id = %s AND status = ANY(%s)".encode(),
                    (BackfillState.CANCELLED.value, reason.strip(), by, backfill_id, froms),
                )
                if cur.rowcount == 1:
                    return
                status = self._hold(db, backfill_id)[0]
                if status == BackfillState.CANCELLED:
                    if retried:
                        return  # the earlier try committed
                    raise IllegalTransitionError(f"backfill {backfill_id} is cancelled already")
                check_backfill_transition(backfill_id, status, BackfillState.CANCELLED.value)

        self._do("cancelling a backfill", run)

    def set_options(self, backfill_id: str, options: Mapping[str, Any]) -> None:
        text = json.dumps(dict(options), sort_keys=True)

        def run(db: Conn, _: bool) -> None:
            cur = db.execute(
                f"UPDATE backfills SET options = %s, updated_at = {NOW} WHERE id = %s".encode(),
                (text, backfill_id),
            )
            if cur.rowcount != 1:
                raise self._not_found(db, backfill_id)

        self._do("recording run options", run)

    def ready(self, backfill_id: str, limit: int) -> list[TaskRow]:
        if limit <= 0:
            return []

        def run(db: Conn, _: bool) -> list[TaskRow]:
            if held_message(backfill_id, *self._hold(db, backfill_id)):
                return []
            return [task_row(r) for r in db.execute(_READY, {"b": backfill_id, "n": limit})]

        return self._do("listing ready tasks", run)

    @staticmethod
    def _open_rows(db: Conn, project: str) -> list[dict[str, Any]]:
        """The tasks of the project's open backfills (read inside a create's transaction too)."""
        cur = db.execute(OPEN_ROWS_SQL.replace("?", "%s").encode(), (project,))
        names = [d.name for d in cur.description or ()]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def overlaps(self, project: str, tasks: Sequence[Mapping[str, Any]]) -> list[Overlap]:
        return self._do(
            "finding overlapping backfills",
            lambda db, _: find_overlaps(tasks, self._open_rows(db, project)),
        )
