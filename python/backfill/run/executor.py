"""One claimed task, run once: the executor every runner shares (the thread-pool runner of
:meth:`Backfill.run` and the Airflow task alike).

>>> executor = TaskExecutor(project=project, engine=engine, ledger=ledger, backfill_id=bf.id,
...                         area=bf.area, worker=worker, lease_seconds=60, max_attempts=3,
...                         backoff=1.0)                              # doctest: +SKIP
>>> outcome = executor.execute(claim)                                 # doctest: +SKIP
>>> outcome.status, outcome.message                                   # doctest: +SKIP

While the engine runs the task, a renewal thread keeps the claim's lease alive. The attempt's end
is recorded in the ledger: ``done`` with rows and fingerprint; ``pending`` with a ``retry_at``
(exponential backoff) when the failure is transient and attempts are left; ``failed`` otherwise.
A lease lost while the task ran is an outcome (``lost``), not an exception: another worker may
own the task now, so this one records no result for it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..engines import Area, Engine, TaskFailure, WriteResult
from ..errors import PROGRAMMING_ERRORS, BackfillError, InvalidInputError
from ..fingerprints import PartitionFingerprint
from ..model.landing import LandingSource
from .ledger import Claim, LedgerBackend, LedgerError, TaskEnd, TaskRow
from .status import TaskEvent
from .stop import Stop

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["OutcomeStatus", "TaskExecutor", "TaskOutcome", "is_transient"]

#: done; pending (a retry is due at ``retry_at``); failed (for good); lost (the lease ran out);
#: interrupted (a stopping runner interrupted it: nothing committed, the task is pending again)
OutcomeStatus = Literal["done", "pending", "failed", "lost", "interrupted"]
_EVENT_KIND: dict[str, str] = {
    "done": "done",
    "pending": "retry",
    "failed": "failed",
    "lost": "lost",
    "interrupted": "interrupted",
}


@dataclass(frozen=True)
class TaskOutcome:
    """How one attempt of a task ended, as recorded in the ledger."""

    backfill_id: str
    task: TaskRow
    attempt: int
    status: OutcomeStatus
    seconds: float
    rows_written: int | None = None
    rows_deleted: int | None = None
    fingerprint: PartitionFingerprint | None = None  # of the period the task wrote
    error: str | None = None  # the failure itself, as the ledger records it
    transient: bool = False  # worth retrying (a lost lease is)
    retry_at: float | None = None  # epoch seconds, when pending

    @property
    def ok(self) -> bool:
        return self.status == "done"

    @property
    def message(self) -> str:
        """One line saying what happened, the same in logs, the CLI and Airflow."""
        t = self.task
        what = f"backfill {self.backfill_id}: {t.model} {t.label}"
        if self.status == "done":
            return (
                f"{what} done in {self.seconds:.2f}s (task {t.task_id}, attempt "
                f"{self.attempt}): {self.rows_written} row(s) written, {self.rows_deleted} "
                "deleted"
            )
        head = f"{what} (task {t.task_id}) attempt {self.attempt}"
        if self.status == "interrupted":
            return (
                f"{head} was interrupted after {self.seconds:.1f}s ({self.error}); nothing of "
                "it was committed, it runs again on resume"
            )
        if self.status == "lost":
            return (
                f"{head} lost its lease while it ran; another worker may take the task "
                f"over (raise lease_seconds?){': ' + self.error if self.error else ''}"
            )
        kind = "transient" if self.transient else "permanent"
        then = (
            f"; retry in {max(0.0, (self.retry_at or 0) - time.time()):.1f}s"
            if self.status == "pending"
            else ""
        )
        return f"{head} failed ({kind}): {self.error}{then}"

    def event(self) -> TaskEvent:
        """The progress event of this outcome (kind done, retry, failed or lost)."""
        t = self.task
        return TaskEvent(
            _EVENT_KIND[self.status],
            t.model,
            t.label,
            t.task_id,
            self.attempt,
            self.seconds,
            self.rows_written,
            None if self.ok else self.error,
        )


def is_transient(exc: BaseException) -> bool:
    """Whether a failure is worth retrying: :class:`TaskFailure` says; any other of our errors is
    permanent (bad input fails the same way again), and so is a programming error
    (AttributeError, TypeError, ... see :data:`~backfill.errors.PROGRAMMING_ERRORS`: a bug fails
    the same way on every attempt); anything else unexpected (I/O, a driver hiccup) may pass."""
    if isinstance(exc, TaskFailure):
        return exc.transient
    return not isinstance(exc, (BackfillError, *PROGRAMMING_ERRORS))


def _error_text(exc: BaseException) -> str:
    # Our errors are written for users; a foreign one needs its type to make sense.
    return str(exc) if isinstance(exc, BackfillError) else f"{type(exc).__name__}: {exc}"


class _Renewals:
    """One daemon thread per process renews the leases of every running task (a thread per
    task cost two scheduling waits per task, start and join: ~30 ms on a loaded machine)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._leases: dict[int, _Lease] = {}
        self._thread: threading.Thread | None = None

    def add(self, lease: _Lease) -> None:
        with self._cond:
            self._leases[id(lease)] = lease
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, daemon=True, name="backfill-lease-renewals"
                )
                self._thread.start()
            self._cond.notify()

    def remove(self, lease: _Lease) -> None:
        with self._cond:
            self._leases.pop(id(lease), None)

    def _loop(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [lease for lease in self._leases.values() if lease.next_at <= now]
                if not due:
                    soonest = min((lease.next_at for lease in self._leases.values()), default=None)
                    self._cond.wait(None if soonest is None else soonest - now)
                    continue
            for lease in due:  # outside the lock: a slow ledger does not block add/remove
                lease.renew()


_RENEWALS = _Renewals()


class _Lease:
    """Keeps one claim's lease: renewed every third of ``lease_seconds`` (by the process's
    renewal thread), and knows when the lease ends by this process's clock should renewals
    fail, or that it was taken (``lost``: a renewal found another worker's lease, or none).
    A renewal that fails for another reason than the ledger's storage (a bug of the backend)
    stops renewing and is kept in ``broken``: :meth:`TaskExecutor.execute` raises it when the task
    ends, instead of reporting a lost lease."""

    def __init__(
        self,
        ledger: LedgerBackend,
        backfill_id: str,
        worker: str,
        task_id: int,
        lease_seconds: float,
    ) -> None:
        self._ledger, self._backfill_id, self._worker = ledger, backfill_id, worker
        self._task_id, self._seconds = task_id, lease_seconds
        # The claim was made just before; its lease runs from then.
        self._expires = time.monotonic() + lease_seconds
        self.next_at = time.monotonic() + lease_seconds / 3
        self._lock = threading.Lock()  # held while renewing: the end waits for a renewal
        self._ended = False
        self.lost = False
        self.broken: Exception | None = None

    def __enter__(self) -> _Lease:
        _RENEWALS.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _RENEWALS.remove(self)
        with self._lock:  # no renewal of this lease runs after this
            self._ended = True

    @property
    def expired(self) -> bool:
        return time.monotonic() > self._expires

    def renew(self) -> None:
        with self._lock:
            if self._ended or self.lost:
                return
            asked = time.monotonic()  # the ledger stamps the new lease after this instant
            self.next_at = asked + self._seconds / 3
            try:
                held = self._ledger.renew(
                    self._backfill_id, self._worker, [self._task_id], self._seconds
                )
            except (LedgerError, OSError):
                # Keep trying: a locked or briefly unreachable ledger may recover. (A backend
                # reports its storage's failures as LedgerError; OSError is a socket or disk.)
                log.warning(
                    "backfill %s: renewing the lease of task %d failed",
                    self._backfill_id,
                    self._task_id,
                    exc_info=True,
                )
                return
            except Exception as exc:
                # Any other error is a bug of the ledger backend that every renewal would meet:
                # the renewal thread (shared by every task) must not die of it, and the task
                # must not end as a lost lease (retried elsewhere) because of it.
                self.broken = exc
                _RENEWALS.remove(self)
                log.error(
                    "backfill %s: renewing the lease of task %d failed: %s: %s",
                    self._backfill_id,
                    self._task_id,
                    type(exc).__name__,
                    exc,
                    exc_info=True,
                )
                return
            if held < 1:  # taken over (it expired and another worker claimed the task)
                self.lost = True
                _RENEWALS.remove(self)
                log.warning(
                    "backfill %s: task %d: the lease was taken from worker %s while the "
                    "task ran; its result will not be recorded",
                    self._backfill_id,
                    self._task_id,
                    self._worker,
                )
                return
            self._expires = asked + self._seconds


def _land(
    source: LandingSource,
    claim: Claim,
    *,
    project: Project,
    engine: Engine,
    ledger: LedgerBackend,
    backfill_id: str,
    area: Area,
) -> WriteResult:
    """A landing task: its period's records from its source (Kafka), written by the engine; the
    ledger keeps the log positions this attempt read before the write (so a failed write still
    says)."""
    t = claim.task
    assert t.start is not None and t.end is not None
    rows, detail, dead = source.read_period(t.model, t.start, t.end)
    ledger.record_attempt_detail(backfill_id, claim.attempt_id, json.dumps(detail))
    return engine.land(project, t.model, t.start, t.end, area, rows, dead)


@dataclass(frozen=True)
class TaskExecutor:
    """Runs claimed tasks of one backfill for one worker: each task once through ``engine``,
    keeping its lease, and records the end of the attempt in ``ledger``. ``max_attempts`` bounds
    the ledger's own retries (an orchestrator that retries by itself, such as Airflow, passes 1);
    a transient failure before that is retried ``backoff * 2**(attempt-1)`` seconds later. A
    failure once ``stop`` has aborted (the runner interrupted the engine) is ``interrupted``: the
    task becomes pending again at once, its lease released.

    What stays the same for every task of a worker is set once here (the runner's threads share
    one executor), so :meth:`execute` takes only the claim."""

    project: Project
    engine: Engine
    ledger: LedgerBackend
    backfill_id: str
    area: Area
    worker: str
    lease_seconds: float = 60.0
    max_attempts: int = 3
    backoff: float = 1.0
    stop: Stop | None = None

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise InvalidInputError(f"max_attempts {attempts!r} is not a positive integer")
        if not self.backoff >= 0:
            raise InvalidInputError(f"backoff {self.backoff!r} must be >= 0 seconds")
        if not self.lease_seconds > 0:
            raise InvalidInputError(f"lease_seconds {self.lease_seconds!r} must be > 0")

    def execute(self, claim: Claim) -> TaskOutcome:
        """Runs the claimed task once. Never raises for a failing task; errors of the ledger
        itself propagate."""
        project, engine, ledger = self.project, self.engine, self.ledger
        backfill_id, area, worker = self.backfill_id, self.area, self.worker
        lease_seconds, max_attempts, backoff, stop = (
            self.lease_seconds,
            self.max_attempts,
            self.backoff,
            self.stop,
        )
        t = claim.task
        base = TaskOutcome(backfill_id, t, claim.attempt, "lost", 0.0)
        log.info(
            "backfill %s: running %s %s (task %d, attempt %d, worker %s)",
            backfill_id,
            t.model,
            t.label,
            t.task_id,
            claim.attempt,
            worker,
        )
        began = time.perf_counter()
        result: WriteResult | None = None
        failure: BaseException | None = None
        with _Lease(ledger, backfill_id, worker, t.task_id, lease_seconds) as lease:
            try:
                landing = (
                    project.models[t.model].meta.get("landing")
                    if t.model in project.models
                    else None
                )
                if isinstance(landing, LandingSource) and t.start is not None and t.end is not None:
                    result = _land(
                        landing,
                        claim,
                        project=project,
                        engine=engine,
                        ledger=ledger,
                        backfill_id=backfill_id,
                        area=area,
                    )
                else:
                    result = engine.run_task(project, t.model, t.start, t.end, area)
            except Exception as exc:
                # Broad on purpose: whatever a task raises is recorded (a foreign error with its
                # type, see _error_text) and the other tasks go on; is_transient decides on a
                # retry, and a programming error is never transient.
                failure = exc
        seconds = time.perf_counter() - began
        if lease.broken is not None:  # the ledger itself failed: its errors propagate (see above)
            raise lease.broken
        if lease.expired or lease.lost:
            # Renewals failed until the lease ran out, or found it taken: another worker may own the
            # task now or soon, so this one records nothing (the ledger would refuse it anyway); the
            # ledger marks the attempt abandoned when it drops the lease, and the task becomes
            # claimable again.
            out = dataclasses.replace(
                base,
                seconds=seconds,
                transient=True,
                error=None if failure is None else _error_text(failure),
            )
            log.warning("%s", out.message)
            return out
        if result is not None:
            # With the partitions' fingerprints when the engine computed them (the audit uses them).
            status = ledger.finish(
                claim,
                backfill_id,
                worker,
                TaskEnd.success(
                    result.seconds,
                    result.rows_written,
                    result.rows_deleted,
                    result.task_fingerprint(),
                ),
            )
            out = dataclasses.replace(
                base,
                seconds=result.seconds,
                rows_written=result.rows_written,
                rows_deleted=result.rows_deleted,
                fingerprint=result.fingerprint,
                status="done" if status == "done" else "lost",
                transient=status != "done",
            )
            log.log(logging.INFO if out.ok else logging.WARNING, "%s", out.message)
            return out
        assert failure is not None  # the engine either returned or raised
        error = _error_text(failure)
        if stop is not None and stop.aborted:
            return _interrupted(claim, base, ledger, backfill_id, worker, seconds, error, stop)
        transient = is_transient(failure)
        retry_in = (
            backoff * 2 ** (claim.attempt - 1)
            if transient and claim.attempt < max_attempts
            else None
        )
        status = ledger.finish(
            claim,
            backfill_id,
            worker,
            TaskEnd.failure(seconds, error, retry_in),
        )
        ended: OutcomeStatus = (
            "pending" if status == "pending" else "failed" if status == "failed" else "lost"
        )
        out = dataclasses.replace(
            base,
            status=ended,
            seconds=seconds,
            error=error,
            transient=transient or ended == "lost",
            retry_at=(
                time.time() + retry_in if ended == "pending" and retry_in is not None else None
            ),
        )
        level = {"pending": logging.INFO, "failed": logging.ERROR}.get(ended, logging.WARNING)
        log.log(level, "%s", out.message)
        return out


def _interrupted(
    claim: Claim,
    base: TaskOutcome,
    ledger: LedgerBackend,
    backfill_id: str,
    worker: str,
    seconds: float,
    error: str,
    stop: Stop,
) -> TaskOutcome:
    """Records an attempt the stopping runner interrupted: failed, with the task pending and
    due now (whatever attempts are left: it did not fail by itself) and its lease released."""
    why = f"interrupted by {stop.describe()}"
    status = ledger.finish(
        claim,
        backfill_id,
        worker,
        TaskEnd.failure(seconds, f"{why}: {error}", 0),
    )
    out = dataclasses.replace(
        base,
        status="interrupted" if status == "pending" else "lost",
        seconds=seconds,
        error=why,
        transient=True,
    )
    log.warning("%s", out.message)
    return out
