"""The lifecycle of backfills, tasks and attempts: their states and the allowed transitions, in
one place. Every ledger backend derives its guarded updates from these tables (``UPDATE ... WHERE
status IN`` the states a move may start from) and raises :class:`IllegalTransitionError` for any
other move, so check and change are one step in the database.

Backfill::

    pending -> running -> done -> published
                  |  ^      |
                  v  |      v
                 failed    (re-run: running)      any unpublished state -> discarded

    pending, running, failed, done -> cancelled -> discarded   (``cancel``: nothing more runs;
                                                               the audit area stays until discard)

    running -> interrupted -> running (resume), done, failed, cancelled, discarded
               (a runner stopped by SIGINT/SIGTERM with tasks left and no other worker alive:
               its running tasks finished or were aborted and their leases released; a resume
               runs the rest)

A pause is not a state but a hold on one (``paused_at``): a pending, running, interrupted or
failed backfill
may be paused (its running tasks finish, nothing new is claimed) and resumed; see
:data:`PAUSABLE`.

Staying in a state is allowed (two workers both mark a backfill running, then done); in a final
state (published, discarded) that is a no-op that changes nothing. Only
``record_publication`` publishes, so a published backfill always has its publication row.

Task::

    pending -> running -> done
       ^          |
       +----------+ (retry, or a lost lease) ; running -> failed -> pending (resume / retry)
                                                          failed -> running (claimed by id)

Attempt::

    running -> done | failed | abandoned (its worker lost the lease; final, even if the worker
                                          reports later)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import TypeVar

from ...errors import ConflictError, InvalidInputError

__all__ = [
    "ATTEMPT_TRANSITIONS",
    "BACKFILL_TRANSITIONS",
    "ENDED_ATTEMPTS",
    "OPEN",
    "PAUSABLE",
    "TASK_TRANSITIONS",
    "V1_BACKFILL_STATES",
    "V3_BACKFILL_STATES",
    "AttemptState",
    "BackfillState",
    "IllegalTransitionError",
    "TaskState",
    "allowed_from",
    "check_backfill_transition",
    "check_pausable",
    "check_settable",
    "finish_target",
    "finished_stamp",
    "refused_backfill_move",
    "set_status_target",
    "sources",
]

S = TypeVar("S", bound=enum.Enum)


class BackfillState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    PUBLISHED = "published"
    DISCARDED = "discarded"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # a runner was stopped (SIGINT/SIGTERM) before the end

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        return self in (BackfillState.PUBLISHED, BackfillState.DISCARDED)

    @property
    def runnable(self) -> bool:
        """Tasks may still run (not published, discarded or cancelled)."""
        return not self.final and self is not BackfillState.CANCELLED


class TaskState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


class AttemptState(str, enum.Enum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    ABANDONED = "abandoned"  # its worker lost the lease (died, or stalled past the lease)

    def __str__(self) -> str:
        return self.value


B = BackfillState
#: state -> the states a backfill may move to from it (staying put: see the module doc)
BACKFILL_TRANSITIONS: dict[BackfillState, frozenset[BackfillState]] = {
    B.PENDING: frozenset({B.RUNNING, B.DONE, B.FAILED, B.DISCARDED, B.CANCELLED}),
    B.RUNNING: frozenset({B.DONE, B.FAILED, B.DISCARDED, B.CANCELLED, B.INTERRUPTED}),
    B.INTERRUPTED: frozenset({B.RUNNING, B.DONE, B.FAILED, B.DISCARDED, B.CANCELLED}),
    B.FAILED: frozenset({B.RUNNING, B.DONE, B.DISCARDED, B.CANCELLED}),
    B.DONE: frozenset({B.RUNNING, B.PUBLISHED, B.DISCARDED, B.CANCELLED}),
    B.PUBLISHED: frozenset(),
    B.DISCARDED: frozenset(),
    B.CANCELLED: frozenset({B.DISCARDED}),
}

#: the states a backfill may be paused in (a finished one has nothing left to hold back)
PAUSABLE: frozenset[BackfillState] = frozenset({B.PENDING, B.RUNNING, B.INTERRUPTED, B.FAILED})

#: the states of a backfill that may still publish (or, a direct one, has written the published
#: tables): another backfill writing the same partitions overlaps it
OPEN: tuple[BackfillState, ...] = (B.PENDING, B.RUNNING, B.FAILED, B.DONE)

#: the states of a backfill as version 1 and 2 ledgers stored them (their CHECK constraints)
V1_BACKFILL_STATES = ("pending", "running", "done", "failed", "published", "discarded")
#: ... and as version 3 and 4 ledgers stored them (version 5 adds ``interrupted``)
V3_BACKFILL_STATES = (*V1_BACKFILL_STATES, "cancelled")

T = TaskState
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    T.PENDING: frozenset({T.RUNNING}),
    T.RUNNING: frozenset({T.DONE, T.FAILED, T.PENDING}),
    T.FAILED: frozenset({T.PENDING, T.RUNNING}),
    T.DONE: frozenset(),
}

A = AttemptState
ATTEMPT_TRANSITIONS: dict[AttemptState, frozenset[AttemptState]] = {
    A.RUNNING: frozenset({A.DONE, A.FAILED, A.ABANDONED}),
    A.DONE: frozenset(),
    A.FAILED: frozenset(),
    A.ABANDONED: frozenset(),
}


#: the states of an attempt that ran to its end (its seconds count as spent)
ENDED_ATTEMPTS: tuple[AttemptState, ...] = (A.DONE, A.FAILED)


def finish_target(ok: bool, retry_in: float | None) -> TaskState:
    """The state a task's attempt moves it to: done (``ok``), pending for ``retry_in`` seconds
    (a failure to retry) or failed."""
    if ok:
        return TaskState.DONE
    return TaskState.PENDING if retry_in is not None else TaskState.FAILED


class IllegalTransitionError(ConflictError):
    """A state change the lifecycle does not allow (e.g. running a published backfill)."""


def sources(
    table: Mapping[S, frozenset[S]], target: S, among: Iterable[S] | None = None
) -> list[S]:
    """The states that may move to ``target`` in ``table`` (not ``target`` itself), restricted
    to ``among`` when given: what a guarded ``UPDATE ... WHERE status IN (...)`` lists.

    Raises ValueError when none may: the caller asked for a move the lifecycle does not have
    (a bug in the backend, caught the first time that code path runs)."""
    wanted = None if among is None else set(among)
    found = [s for s, nxt in table.items() if target in nxt and (wanted is None or s in wanted)]
    if not found:
        raise ValueError(
            f"no transition to {target.value!r} from "
            f"{sorted(s.value for s in wanted) if wanted else 'any state'}"
        )
    return found


def allowed_from(target: BackfillState) -> list[BackfillState]:
    """The states a backfill may be in for ``set_status(target)`` to write: those that may move
    to ``target``, and ``target`` itself unless it is final (staying there writes nothing)."""
    stay = [] if target.final else [target]
    return [s for s, nxt in BACKFILL_TRANSITIONS.items() if target in nxt] + stay


def check_pausable(backfill_id: str, current: str, paused: bool, pause: bool) -> None:
    """Raises :class:`IllegalTransitionError` naming the backfill's state unless it may be
    paused (``pause``) or resumed from a pause now."""
    cur = BackfillState(current)
    if pause and cur not in PAUSABLE:
        raise IllegalTransitionError(
            f"backfill {backfill_id} is {cur}; only a pending, running, interrupted or failed "
            "backfill can be paused (nothing of it would run anyway)"
        )
    if pause and paused:
        raise IllegalTransitionError(f"backfill {backfill_id} is paused already")
    if not pause and not paused:
        raise IllegalTransitionError(
            f"backfill {backfill_id} is {cur}, not paused; nothing to "
            "resume (to run what is left: backfill run --resume "
            f"{backfill_id})"
        )


def check_backfill_transition(backfill_id: str, current: str, target: str) -> None:
    """Raises :class:`IllegalTransitionError` unless ``current -> target`` is allowed."""
    cur, new = BackfillState(current), BackfillState(target)
    if cur != new and new not in BACKFILL_TRANSITIONS[cur]:
        raise IllegalTransitionError(
            f"backfill {backfill_id} is {cur}; it cannot become {new} (from {cur} it may "
            f"become {', '.join(sorted(s.value for s in BACKFILL_TRANSITIONS[cur])) or 'nothing'})"
        )


def check_settable(backfill_id: str, target: BackfillState) -> None:
    """Publishing and cancelling record more than a status: their own methods do them."""
    if target in (BackfillState.PUBLISHED, BackfillState.CANCELLED):
        how = "record_publication" if target is BackfillState.PUBLISHED else "cancel"
        raise InvalidInputError(
            f"backfill {backfill_id}: {target.value} only through {how} "
            f"(it records the {'publication' if how != 'cancel' else 'reason'}"
            " with the status)"
        )


# What ``set_status`` and ``record_publication`` decide before and after their guarded UPDATE,
# shared by every backend so they cannot drift apart: the backend only runs the UPDATE.


def set_status_target(backfill_id: str, status: BackfillState | str) -> BackfillState:
    """The state ``set_status(backfill_id, status)`` moves to; InvalidInputError for an unknown
    status, and for ``published`` and ``cancelled`` (only ``record_publication`` publishes and
    ``cancel`` cancels, so a published backfill always has its publication row and a cancelled
    one its reason)."""
    try:
        target = BackfillState(status)
    except ValueError:
        raise InvalidInputError(
            f"backfill status {status!r}: expected one of "
            f"{', '.join(s.value for s in BackfillState)}"
        ) from None
    check_settable(backfill_id, target)
    return target


def finished_stamp(target: BackfillState, finished: bool) -> str:
    """What a move to ``target`` does to ``finished_at``: ``"now"`` when the run ends
    (``finished``), ``"clear"`` when it runs again, else ``"keep"`` (a publication keeps when
    its run finished)."""
    if finished:
        return "now"
    return "clear" if target in (BackfillState.PENDING, BackfillState.RUNNING) else "keep"


def refused_backfill_move(
    backfill_id: str, current: str, target: BackfillState, stay_ok: bool
) -> None:
    """Called when the guarded UPDATE to ``target`` changed no row while the backfill is
    ``current``: returns when that is a no-op (staying in a final state, ``stay_ok``), else
    raises :class:`IllegalTransitionError` naming the move."""
    now = BackfillState(current)
    if now == target and target.final and stay_ok:
        return  # staying in a final state: nothing to write
    check_backfill_transition(backfill_id, now.value, target.value)  # not in the table
    raise IllegalTransitionError(f"backfill {backfill_id} is {now} already")
