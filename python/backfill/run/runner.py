"""The runner: one worker running a recorded backfill's tasks until none is left for it.

>>> Runner(bf, RunOptions(concurrency=8)).run()          # what bf.run(concurrency=8) does
...                                                      # doctest: +SKIP

A run starts (checks, marks the backfill running), then goes round after round: each round
claims what fits the free slots, the windows and the budget, hands the claims to a thread pool,
and either collects finished tasks or, with nothing running, decides whether to wait (a backoff,
a pause, a closed window) or to end (finished, cancelled, the budget spent, a stop). It ends by
recording the backfill's final state. :meth:`backfill.run.Backfill.run` documents the options.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..windows import check_specs
from .executor import TaskExecutor, TaskOutcome
from .ledger import (
    BackfillHeldError,
    BackfillRecord,
    BackfillState,
    Claim,
    IllegalTransitionError,
    LedgerBackend,
    TaskBusyError,
    TaskState,
    new_worker_id,
)
from .limits import Clock, RunLimits, SystemClock, spent_seconds
from .status import BackfillStatus, TaskEvent
from .stop import DEFAULT_GRACE, Stop, drain, sleep

if TYPE_CHECKING:  # pragma: no cover
    import datetime as dt

    from .backfill import Backfill

log = logging.getLogger(__name__)

__all__ = ["RunOptions", "Runner"]


@dataclass(frozen=True)
class RunOptions:
    """How one worker runs a backfill (see :meth:`backfill.run.Backfill.run`); checked when
    made, so a bad value is refused before anything changes."""

    concurrency: int = 4
    max_attempts: int = 3
    backoff: float = 1.0
    lease_seconds: float = 60.0
    poll: float = 0.05
    on_event: Callable[[TaskEvent], None] | None = None
    windows: str | list[str] | None = None
    exit_outside_window: bool = False
    exit_when_held: bool = False
    clock: Clock | None = None
    max_wait: float = 60.0
    held_poll: float = 5.0
    stop: Stop | None = None
    grace: float = DEFAULT_GRACE

    def __post_init__(self) -> None:
        for name, value in (("concurrency", self.concurrency), ("max_attempts", self.max_attempts)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} {value!r} is not a positive integer")
        if (
            self.backoff < 0
            or self.lease_seconds <= 0
            or self.poll <= 0
            or self.max_wait <= 0
            or self.held_poll <= 0
            or not self.grace >= 0
        ):
            raise InvalidInputError(
                "backoff and grace must be >= 0; lease_seconds, poll, max_wait and held_poll > 0"
            )

    @classmethod
    def of(cls, concurrency: int | RunOptions = 4, **options: Any) -> RunOptions:
        """The options of :meth:`backfill.run.Backfill.run`'s call: a ``RunOptions`` (with
        ``options`` replacing some of its fields), or the keywords themselves."""
        if isinstance(concurrency, RunOptions):
            return dataclasses.replace(concurrency, **options) if options else concurrency
        return cls(concurrency, **options)


class Runner:
    """One worker's run of a backfill; :meth:`run` it once."""

    def __init__(self, backfill: Backfill, options: RunOptions) -> None:
        self.bf = backfill
        self.ledger: LedgerBackend = backfill.ledger
        self.options = options
        self.worker = new_worker_id()
        self.clock: Clock = options.clock or SystemClock()
        self.emit: Callable[[TaskEvent], None] = options.on_event or (lambda _e: None)
        self.running: set[Future[TaskOutcome]] = set()
        self.said: str | None = None  # the last wait logged (said once, not every poll)
        self.left_running = 0  # tasks a stop could not interrupt: the pool is not waited for
        # An engine that runs tasks together (capabilities.task_group) gets that many per slot
        self.group = max(1, backfill.engine.capabilities.task_group)
        self.slots = options.concurrency * self.group

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> BackfillStatus:
        """Runs the backfill's remaining tasks; returns its final status."""
        self._start()
        execute = TaskExecutor(
            project=self.bf.project,
            engine=self.bf.engine,
            ledger=self.ledger,
            backfill_id=self.bf.id,
            area=self.bf.area,
            worker=self.worker,
            lease_seconds=self.options.lease_seconds,
            max_attempts=self.options.max_attempts,
            backoff=self.options.backoff,
            stop=self.options.stop,
        )
        pool = ThreadPoolExecutor(
            max_workers=self.slots, thread_name_prefix=f"backfill-{self.bf.id}"
        )
        try:
            while self._round(pool, execute.execute):
                pass
        finally:
            pool.shutdown(wait=not self.left_running, cancel_futures=True)
            self.bf.engine.close()
        return self._finish()

    def _start(self) -> None:
        """Refuses a backfill that cannot run (or whose SQL changed), records the run's windows
        and marks it running (unless paused: it then waits, or returns, in the rounds)."""
        bf, opts = self.bf, self.options
        rec = self.ledger.backfill(bf.id)
        if not rec.status.runnable:
            raise InvalidInputError(f"backfill {bf.id} is {rec.status}; it cannot run")
        bf.check_sql()
        if opts.windows is not None:  # recorded, so status (any process) tells when it runs
            self.ledger.set_options(
                bf.id,
                {**rec.options, "windows": check_specs(opts.windows, "run")},
            )
        if rec.paused_at is None:
            self.ledger.set_status(bf.id, BackfillState.RUNNING)
        log.info(
            "backfill %s: worker %s starts (concurrency %d)", bf.id, self.worker, opts.concurrency
        )

    def _round(self, pool: ThreadPoolExecutor, execute: Callable[[Claim], TaskOutcome]) -> bool:
        """One round: claim, then collect or wait. False when this worker is done."""
        if self.options.stop is not None and self.options.stop.requested:
            self._drain()
            return False
        rec = self.ledger.backfill(self.bf.id)
        limits = RunLimits.from_options(rec.options)
        blocked = self._submit(pool, execute, limits)
        if self.running:  # a pause or cancel lets them finish; claims stop meanwhile
            self._collect()
            return True
        return self._idle(rec, blocked, limits)

    def _finish(self) -> BackfillStatus:
        """Records how the backfill ended (done, failed, interrupted) and returns its status."""
        bf, stop = self.bf, self.options.stop
        final = bf.status(now=self.clock.now())
        if stop is not None and stop.requested and not final.finished:
            return self._interrupted(stop)
        status = BackfillState.FAILED if final.failed_tasks else BackfillState.DONE
        if final.finished and self.ledger.backfill(bf.id).status.runnable:
            # cancelled meanwhile by another process: that stands
            with contextlib.suppress(IllegalTransitionError):
                self.ledger.set_status(bf.id, status, finished=True)
        final = bf.status(now=self.clock.now())
        log.info("backfill %s: %s", bf.id, final)
        return final

    # -- the steps of a round --------------------------------------------------------------------
    def _submit(
        self,
        pool: ThreadPoolExecutor,
        execute: Callable[[Claim], TaskOutcome],
        limits: RunLimits,
    ) -> str | None:
        """Claims what fits and hands it to the pool; says what held a task back, if anything.
        An engine running tasks together gets them in rounds: what becomes ready during one
        (the next model's batches, as their inputs finish one by one) is handed over together
        after it."""
        free = 0 if self.group > 1 and self.running else self.slots - len(self.running)
        claims, blocked = self._claim(free, limits, self.clock.now())
        if self.group > 1 and claims:
            self.bf.engine.expect(len(claims))
        for claim in claims:
            task = claim.task
            self.emit(TaskEvent("started", task.model, task.label, task.task_id, claim.attempt))
            self.running.add(pool.submit(execute, claim))
        return blocked

    def _claim(
        self, free: int, limits: RunLimits, now: dt.datetime
    ) -> tuple[list[Claim], str | None]:
        """Claims up to ``free`` tasks that fit ``limits``; also says what held one back."""
        bf_id, lease = self.bf.id, self.options.lease_seconds
        if free <= 0:
            return [], None
        if not limits.bound:
            return self.ledger.claim(bf_id, self.worker, free, lease), None
        tasks = {t.task_id: t for t in self.ledger.tasks(bf_id)}
        attempts = self.ledger.attempts(bf_id)
        per = limits.per_partition(attempts, tasks)
        committed = spent_seconds(attempts) + sum(
            limits.cost(t, per) for t in tasks.values() if t.status == TaskState.RUNNING
        )
        claims: list[Claim] = []
        blocked: str | None = None
        for task in self.ledger.ready(bf_id, free):
            why = limits.held_back(task, per, committed, now)
            if why is not None:
                blocked = blocked or why
                continue
            try:
                got = self.ledger.claim_task(bf_id, task.task_id, self.worker, lease)
            except (TaskBusyError, BackfillHeldError):
                continue  # another worker took it, or a pause landed: seen next round
            if isinstance(got, Claim):
                claims.append(got)
                committed += limits.cost(task, per)
        return claims, blocked

    def _collect(self) -> None:
        """Waits for a running task to end and reports those that did."""
        done, _ = wait(
            self.running, timeout=max(self.options.poll, 0.5), return_when=FIRST_COMPLETED
        )
        for fut in done:
            self.running.discard(fut)
            self.emit(fut.result().event())  # re-raises bugs (ledger errors)

    def _idle(self, rec: BackfillRecord, blocked: str | None, limits: RunLimits) -> bool:
        """Nothing runs: ends (cancelled, finished, the budget spent) or waits. False: end."""
        opts, bf = self.options, self.bf
        if rec.status is BackfillState.CANCELLED:
            log.info("backfill %s: cancelled; worker %s stops", bf.id, self.worker)
            return False
        snap = bf.status(now=self.clock.now())
        if snap.finished:
            return False
        if rec.paused_at is not None:
            if opts.exit_when_held:
                return False
            self._say(f"paused; waiting for: backfill resume {bf.id}")
            sleep(self.clock, opts.held_poll, opts.stop)
            return True
        if blocked == "budget":
            return False  # the budget has no room: nothing more from this worker
        if blocked == "window":
            if opts.exit_outside_window:
                return False
            now = self.clock.now()
            opens = limits.next_start(now, self._cheapest(limits))
            wait_for = (opens - now).total_seconds() if opens else opts.poll
            self._say(snap.note or "waiting for a window")
            sleep(self.clock, min(max(wait_for, opts.poll), opts.max_wait), opts.stop)
            return True
        self.said = None
        sleep(self.clock, opts.poll, opts.stop)  # a backoff, or other workers' tasks
        return True

    def _cheapest(self, limits: RunLimits) -> float:
        """The estimated seconds of the cheapest ready task (what must fit in a window)."""
        bf_id = self.bf.id
        tasks = {t.task_id: t for t in self.ledger.tasks(bf_id)}
        per = limits.per_partition(self.ledger.attempts(bf_id), tasks)
        ready = self.ledger.ready(bf_id, len(tasks))
        return min((limits.cost(t, per) for t in ready), default=0.0)

    def _say(self, what: str) -> None:
        if what != self.said:
            log.info("backfill %s: %s", self.bf.id, what)
        self.said = what

    # -- stopping --------------------------------------------------------------------------------
    def _drain(self) -> None:
        """A stop was requested: claim nothing more, let running tasks finish within the grace,
        then interrupt them."""
        stop, grace = self.options.stop, self.options.grace
        assert stop is not None
        log.warning(
            "backfill %s: %s; worker %s claims nothing more%s",
            self.bf.id,
            stop.describe(),
            self.worker,
            f" and lets {len(self.running)} running task(s) finish within {grace:g} s"
            if self.running
            else "",
        )
        self.left_running = drain(
            self.running,
            stop,
            grace,
            self.bf.engine,
            lambda f: self.emit(f.result().event()),
            f"backfill {self.bf.id}",
        )

    def _interrupted(self, stop: Stop) -> BackfillStatus:
        """After a stop with tasks left: the backfill becomes ``interrupted`` unless another
        worker still runs it (then it stays running: that worker carries on)."""
        bf_id = self.bf.id
        others = self.ledger.live_workers(bf_id) - {self.worker}
        if others:
            log.info(
                "backfill %s: worker %s stopped; %d other worker(s) carry on",
                bf_id,
                self.worker,
                len(others),
            )
        elif self.ledger.backfill(bf_id).status is BackfillState.RUNNING:
            # cancelled or finished meanwhile by another process: that stands
            with contextlib.suppress(IllegalTransitionError):
                self.ledger.set_status(bf_id, BackfillState.INTERRUPTED)
        if self.left_running:
            log.warning(
                "backfill %s: %d task(s) could not be interrupted; they hold their "
                "leases until they end or this process does",
                bf_id,
                self.left_running,
            )
        final = self.bf.status(now=self.clock.now())
        log.warning("backfill %s: stopped by %s: %s", bf_id, stop.describe(), final)
        return final
