"""The lifecycle of backfills, tasks and attempts: their states and the allowed transitions, in
one place. Every ledger backend enforces these (in the database, with guarded updates) and raises
:class:`IllegalTransitionError` for any other.

Backfill::

    pending -> running -> done -> published
                  |  ^      |
                  v  |      v
                 failed    (re-run: running)      any unpublished state -> discarded

Task::

    pending -> running -> done
       ^          |
       +----------+ (retry, or a lost lease) ; running -> failed -> pending (resume / retry)
"""

from __future__ import annotations

import enum

from ...errors import ConflictError

__all__ = ["AttemptState", "BackfillState", "IllegalTransitionError", "TaskState",
           "BACKFILL_TRANSITIONS", "TASK_TRANSITIONS", "check_backfill_transition"]


class BackfillState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    PUBLISHED = "published"
    DISCARDED = "discarded"

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        return self in (BackfillState.PUBLISHED, BackfillState.DISCARDED)


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
#: state -> the states a backfill may move to from it (staying in a state is always allowed)
BACKFILL_TRANSITIONS: dict[BackfillState, frozenset[BackfillState]] = {
    B.PENDING: frozenset({B.RUNNING, B.DONE, B.FAILED, B.DISCARDED}),
    B.RUNNING: frozenset({B.DONE, B.FAILED, B.DISCARDED}),
    B.FAILED: frozenset({B.RUNNING, B.DONE, B.DISCARDED}),
    B.DONE: frozenset({B.RUNNING, B.PUBLISHED, B.DISCARDED}),
    B.PUBLISHED: frozenset(),
    B.DISCARDED: frozenset(),
}

T = TaskState
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    T.PENDING: frozenset({T.RUNNING}),
    T.RUNNING: frozenset({T.DONE, T.FAILED, T.PENDING}),
    T.FAILED: frozenset({T.PENDING, T.RUNNING}),
    T.DONE: frozenset(),
}


class IllegalTransitionError(ConflictError):
    """A state change the lifecycle does not allow (e.g. running a published backfill)."""


def allowed_from(target: BackfillState) -> list[BackfillState]:
    """The states a backfill may be in for a move to ``target`` (including ``target``)."""
    return [s for s, nxt in BACKFILL_TRANSITIONS.items() if target in nxt or s == target]


def check_backfill_transition(backfill_id: str, current: str, target: str) -> None:
    """Raises :class:`IllegalTransitionError` unless ``current -> target`` is allowed."""
    cur, new = BackfillState(current), BackfillState(target)
    if cur != new and new not in BACKFILL_TRANSITIONS[cur]:
        raise IllegalTransitionError(
            f"backfill {backfill_id} is {cur}; it cannot become {new} (from {cur} it may "
            f"become {', '.join(sorted(s.value for s in BACKFILL_TRANSITIONS[cur])) or 'nothing'})")
