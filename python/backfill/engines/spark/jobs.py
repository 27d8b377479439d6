"""The Spark jobs of the blocks of work running now (a task's write, an audit's queries), so that
another thread can cancel them: :meth:`SparkJobs.interrupt` is the Spark engine's
``Engine.interrupt``.

Each block of work (the engine's ``connect``) gets a job tag of its own, added to the thread's
Spark local properties before its first job (``SparkContext.addJobTag``; local properties are
per thread, and PySpark pins each Python thread to a JVM thread), with interrupt-on-cancel set:
a cancelled job's running tasks are ``Thread.interrupt``-ed, so a task sleeping or reading in
the JVM stops at once instead of at its end. :meth:`SparkJobs.interrupt` cancels the jobs of
every tag in use (``cancelJobsWithTag``) and marks the tags cancelled: a block between two jobs
raises at its next one (:meth:`SparkJobs.attach`) instead of starting it, and the engine reads
the failure of a cancelled job as an interruption (:meth:`SparkJobs.cancelled`), not as the
task's own failure. A cancelled write job commits nothing (Iceberg commits on the driver after
the job succeeds and deletes the files of an aborted one).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..base import TaskFailure
from ..sql.connection import InUse

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import SparkContext

__all__ = ["SparkJobs", "cancelled_text", "interrupted"]


@dataclass(eq=False)
class _Tag:
    """One block of work's job tag: whether it is on its thread's jobs yet, and whether
    :meth:`SparkJobs.interrupt` cancelled it."""

    name: str
    attached: bool = False
    cancelled: bool = False


def interrupted(where: str, detail: str = "", *, outside: bool = False) -> TaskFailure:
    """The failure of a task whose Spark jobs were cancelled (by :meth:`SparkJobs.interrupt`,
    or ``outside`` backfill: Spark's UI, another program's cancelAllJobs): transient, nothing
    committed, the task runs again."""
    why = "its Spark job was cancelled outside backfill" if outside else "its Spark jobs were"
    why += "" if outside else " cancelled by a stop"
    return TaskFailure(
        f"{where}: interrupted: {why}{f' ({detail})' if detail else ''}", transient=True
    )


class SparkJobs:
    """The job tags of the blocks of work in use, one per thread (a nested block shares its
    thread's)."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._in_use: InUse[_Tag] = InUse()

    def _tag(self) -> _Tag | None:
        tag: _Tag | None = getattr(self._local, "tag", None)
        return tag

    @contextlib.contextmanager
    def lent(self, context: Callable[[], SparkContext | None]) -> Iterator[None]:
        """A block of work in this thread: its jobs carry a tag of their own until it ends.
        ``context``: the SparkContext, when one runs by the end (the tag is removed from the
        thread then; a block may be the one that starts it)."""
        if self._tag() is not None:  # nested: the outer block's tag goes on
            yield
            return
        tag = _Tag(f"backfill-{uuid.uuid4().hex[:16]}")
        self._local.tag = tag
        self._local.last = None
        try:
            with self._in_use.lent(tag):
                yield
        finally:
            # Kept until the thread's next block: the task's error is classified after its
            # block ended (see cancelled).
            self._local.tag, self._local.last = None, tag
            sc = context() if tag.attached else None
            if sc is not None:
                # The thread runs other blocks later: its next jobs must not carry this tag.
                with contextlib.suppress(Exception):  # a stopped context has nothing to clear
                    sc.removeJobTag(tag.name)

    def attach(self, context: SparkContext, where: str = "backfill") -> None:
        """Before a job of this thread: its block's tag on the thread's next jobs (once per
        block); raises :func:`interrupted` when the block was cancelled meanwhile."""
        tag = self._tag()
        if tag is None:
            return
        if tag.cancelled:
            raise interrupted(where, "before its next job")
        if not tag.attached:
            context.addJobTag(tag.name)
            context.setInterruptOnCancel(True)
            tag.attached = True

    def cancelled(self) -> bool:
        """Whether this thread's block of work (the one running, else the last one) was
        cancelled by :meth:`interrupt`."""
        tag = self._tag() or getattr(self._local, "last", None)
        return tag is not None and tag.cancelled

    def interrupt(self, context: SparkContext | None, closed: tuple[type[Exception], ...]) -> int:
        """Cancels the jobs of every block in use now (from any thread); returns how many blocks
        that was. ``closed``: the errors of a context that stopped meanwhile (nothing left to
        cancel)."""
        count = 0

        def cancel(tag: _Tag) -> None:
            nonlocal count
            tag.cancelled = True
            count += 1
            if context is not None and tag.attached:
                context.cancelJobsWithTag(tag.name)

        self._in_use.interrupt(cancel, closed)
        return count


def cancelled_text(text: str) -> bool:
    """Whether a Spark error's text is that of a cancelled job (from this engine's interrupt,
    or killed in Spark's UI)."""
    return any(m in text for m in _CANCELLED)


# Spark 4's messages for a job (or its stage) cancelled by a tag, a group or by hand.
_CANCELLED = (
    "SPARK_JOB_CANCELLED",
    "cancelled part of cancelled job tag",
    "cancelled part of cancelled job group",
    "cancelled as part of cancellation of all jobs",
)
