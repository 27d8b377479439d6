"""Stopping a run on request: SIGINT (Ctrl-C) and SIGTERM, or a call from another thread.

>>> stop = Stop()
>>> with on_signals(stop):                                   # doctest: +SKIP
...     final = bf.run(stop=stop, grace=30)
>>> stop.signal_name, final.status                          # doctest: +SKIP
('SIGTERM', 'interrupted')

The first request stops claiming: the runner lets its running tasks finish within the grace
period, then interrupts those still running (engines that declare ``capabilities.interrupt``;
their transactions roll back), records each such attempt as interrupted (its task pending
again, its lease released) and marks the backfill ``interrupted`` when no other worker runs it.
A second request aborts at once (no grace). Nothing is lost either way: a task either committed
and was recorded done, or rolled back and runs again on resume.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..engines import Engine
    from .limits import Clock

log = logging.getLogger(__name__)

__all__ = ["ABANDON_AFTER", "DEFAULT_GRACE", "Stop", "drain", "on_signals", "sleep"]

#: seconds a stopping runner lets running tasks finish before interrupting them
DEFAULT_GRACE = 30.0


class Stop:
    """A request to stop a run: :meth:`request` once to stop gracefully, twice to abort. Safe
    to call from a signal handler or any thread."""

    def __init__(self) -> None:
        self._requests = 0
        self._since: float | None = None
        self.signal: int | None = None  # the first signal that asked (None: a call)
        self._lock = threading.Lock()

    def request(self, signum: int | None = None) -> None:
        with self._lock:
            self._requests += 1
            if self._since is None:
                self._since, self.signal = time.monotonic(), signum

    def abort(self) -> None:
        """Stop now, without a grace period."""
        with self._lock:
            self._requests = max(self._requests, 1) + 1
            if self._since is None:
                self._since = time.monotonic()

    @property
    def requested(self) -> bool:
        return self._requests > 0

    @property
    def aborted(self) -> bool:
        """A second request came (or :meth:`abort`): running tasks are interrupted now."""
        return self._requests > 1

    def grace_over(self, grace: float) -> bool:
        """The grace period since the first request has passed (or the run was aborted)."""
        return self.aborted or (self._since is not None and time.monotonic() - self._since >= grace)

    @property
    def signal_name(self) -> str | None:
        return None if self.signal is None else signal.Signals(self.signal).name

    def describe(self) -> str:
        """``SIGTERM``, ``SIGINT (Ctrl-C)`` or ``a stop request``: what stopped the run."""
        name = self.signal_name
        if name == "SIGINT":
            return "SIGINT (Ctrl-C)"
        return name or "a stop request"


@contextlib.contextmanager
def on_signals(
    stop: Stop, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM), *, chain: bool = False
) -> Iterator[Stop]:
    """Within the block, ``signals`` request ``stop`` instead of ending the process (the first
    one: stop gracefully; the next: abort). The previous handlers come back after the block;
    with ``chain`` they are called too (an orchestrator's own handler, e.g. Airflow's). Outside
    the main thread (where Python allows no handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    previous: dict[int, Any] = {}

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.request(signum)
        old = previous.get(signum)
        if chain and callable(old):
            old(signum, frame)

    previous.update({s: signal.signal(s, handle) for s in signals})
    try:
        yield stop
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


#: seconds to wait for interrupted tasks to end before leaving them to the process's exit
ABANDON_AFTER = 5.0


def drain(
    running: set[Future[Any]],
    stop: Stop,
    grace: float,
    engine: Engine,
    on_done: Callable[[Future[Any]], None],
    what: str,
) -> int:
    """Waits for the ``running`` task futures of a stopping runner: until they end, or the
    grace period is over; then interrupts them through ``engine`` (again every poll: a task
    between two statements is not stopped by one call) and waits up to :data:`ABANDON_AFTER`
    more. Returns how many were left running (an engine that cannot interrupt, or a task that
    ignores it): their leases stay held until the process ends or the lease expires, so another
    worker never runs them twice, and a rollback by the database loses nothing."""
    interrupted_at: float | None = None
    can = engine.capabilities.interrupt
    while running:
        if stop.grace_over(grace):
            if interrupted_at is None:
                why = (
                    "asked again: aborting at once"
                    if stop.aborted
                    else f"the grace period of {grace:g} s is over"
                )
                stop.abort()  # the executor records failures from now on as interrupted
                interrupted_at = time.monotonic()
                log.warning(
                    "%s: %s; interrupting %d running task(s)%s",
                    what,
                    why,
                    len(running),
                    ""
                    if can
                    else f" (the {engine.name} engine cannot: they are left "
                    "to finish, or to roll back when the process ends)",
                )
            if not can or time.monotonic() - interrupted_at > ABANDON_AFTER:
                return len(running)
            engine.interrupt()
        done, _ = wait(running, timeout=0.1 if stop.aborted else 0.5, return_when=FIRST_COMPLETED)
        for fut in done:
            running.discard(fut)
            on_done(fut)
    return 0


def sleep(clock: Clock, seconds: float, stop: Stop | None) -> None:
    """``clock.sleep(seconds)``, cut short (in slices of 0.2 s) when ``stop`` is requested: a
    runner waiting for a window or a resume still stops within moments."""
    if stop is None:
        clock.sleep(seconds)
        return
    left = seconds  # counted in the clock's own time (a test's clock jumps)
    while left > 0 and not stop.requested:
        step = min(left, 0.2)
        clock.sleep(step)
        left -= step
