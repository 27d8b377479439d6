"""Which waiting tasks of the dbt engine go into one dbt invocation.

dbt's fixed set-up per invocation (adapter, schemas, relation cache, macro contexts, plugin
discovery: py-spy on ``dbt_bench.py``, about 0.3 s of a one-batch invocation's 0.45 s) is paid
once per invocation, so the engine runs as many waiting tasks per invocation as dbt allows. The
runner hands the engine a whole set of claimed tasks at once (``capabilities.task_group``), each
in its own thread; each thread's task waits here (:class:`Pending`) and the first one to hold
the runner takes a group:

- every waiting task of its model whose periods join its own into one interval (one
  ``--event-time-start/--event-time-end`` range: dbt runs one batch per task's period);
- then the waiting tasks of other models that can share that invocation: ``--select a b``
  runs them in dbt's dependency order, so none may be an ancestor of another (a ready task's
  upstream is done, so that only happens across periods); their microbatch periods must tile
  the same interval (dbt applies one range to every selected microbatch model), and a model
  dbt rebuilds with ``--full-refresh`` (a non-microbatch incremental model) goes alone, as the
  flag would apply to every selected model.

Each task's outcome still comes back on its own (dbt's per-node results and ``batch_results``),
so the ledger records, retries and resumes tasks one by one, as before.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...engines import Area, WriteResult

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project

__all__ = ["Pending", "Request", "full_refresh"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Request:
    """One task waiting for (then run in) an invocation."""

    model: str
    start: dt.datetime | None
    end: dt.datetime | None
    area: Area
    done: threading.Event = field(default_factory=threading.Event)
    result: WriteResult | None = None
    error: BaseException | None = None


def full_refresh(project: Project, model: str) -> bool:
    """A model dbt rebuilds whole only with ``--full-refresh`` (incremental, not microbatch)."""
    m = project.models[model]
    return not m.grain and m.meta.get("dbt", {}).get("materialized") == "incremental"


def _ancestors(project: Project, model: str, memo: dict[str, set[str]]) -> set[str]:
    if model not in memo:
        memo[model] = set()  # a cycle cannot happen in dbt; this only stops recursion
        out: set[str] = set()
        for d in project.models[model].depends_on:
            if d.parent in project.models:
                out.add(d.parent)
                out |= _ancestors(project, d.parent, memo)
        memo[model] = out
    return memo[model]


def _run_of(same: list[Request], req: Request) -> list[Request]:
    """The requests of ``same`` (one model, sorted by start) joined with ``req`` end to start."""
    i = same.index(req)
    lo = hi = i
    while lo > 0 and same[lo - 1].end == same[lo].start:
        lo -= 1
    while hi + 1 < len(same) and same[hi].end == same[hi + 1].start:
        hi += 1
    return same[lo : hi + 1]


def _span(run: list[Request]) -> tuple[dt.datetime, dt.datetime] | None:
    if run[0].start is None:
        return None
    assert run[-1].end is not None
    return run[0].start, run[-1].end


class Pending:
    """Tasks waiting for an invocation (thread-safe)."""

    def __init__(self) -> None:
        self._waiting: list[Request] = []
        self._expected = 0  # tasks a runner announced (Engine.expect) that have not arrived
        self._cond = threading.Condition()

    def expect(self, tasks: int) -> None:
        """``tasks`` are about to arrive together. Set, not added: a runner announces a round
        only once the previous one has finished, so a task that never came (a Kafka landing
        task does not call ``run_task``) does not hold up later rounds."""
        with self._cond:
            self._expected = max(0, tasks)
            self._cond.notify_all()

    def add(self, req: Request) -> None:
        with self._cond:
            self._waiting.append(req)
            self._expected = max(0, self._expected - 1)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._waiting)

    def gather(self, pause: float, most: float = 1.0, announced: float = 10.0) -> None:
        """Waits for the tasks of the round a runner announced, ``announced`` seconds at most
        (their threads start within milliseconds, but a loaded machine has taken over 30 ms
        between two). With none announced (tasks handed over by an orchestrator, one call
        each), waits ``pause`` seconds, then again while more tasks arrived meanwhile,
        ``most`` at most."""
        with self._cond:
            if self._expected:
                self._cond.wait_for(lambda: not self._expected, timeout=announced)
                if not self._expected:
                    return
                log.warning(
                    "dbt: %d announced task(s) did not arrive within %g s; invoking "
                    "dbt for the %d waiting",
                    self._expected,
                    announced,
                    len(self._waiting),
                )
                self._expected = 0
                return
        until = time.monotonic() + most
        seen = -1
        while len(self) != seen and time.monotonic() < until:
            seen = len(self)
            time.sleep(pause)

    def take(self, project: Project, req: Request) -> list[Request]:
        """``req`` and the waiting tasks that run with it (see the module doc), removed from
        the waiting list, ``req``'s model first."""
        with self._cond:
            group = self._take(project, req)
            for r in group:
                self._waiting.remove(r)
        return group

    def _take(self, project: Project, req: Request) -> list[Request]:
        by_model: dict[str, list[Request]] = {}
        for r in self._waiting:
            if r.area is req.area:
                by_model.setdefault(r.model, []).append(r)
        if req.start is None:
            group = [req]
        else:
            dated = [(r.start, r) for r in by_model[req.model] if r.start is not None]
            same = [r for _, r in sorted(dated, key=lambda d: d[0])]
            group = _run_of(same, req)
        if full_refresh(project, req.model):
            return group
        span = _span(group)
        memo: dict[str, set[str]] = {}
        models = {req.model}
        for model, waiting in by_model.items():
            if (
                model in models
                or full_refresh(project, model)
                or any(
                    model in _ancestors(project, m, memo) or m in _ancestors(project, model, memo)
                    for m in models
                )
            ):
                continue
            run = self._joinable(waiting, span)
            if run:
                models.add(model)
                group.extend(run)
                span = span or _span(run)
        return group

    @staticmethod
    def _joinable(
        waiting: Iterable[Request],
        span: tuple[dt.datetime, dt.datetime] | None,
    ) -> list[Request]:
        """The tasks of one other model that can share an invocation whose microbatch range is
        ``span`` (None: no range yet): a table's one task, or a run tiling exactly ``span``."""
        whole = [r for r in waiting if r.start is None]
        if whole:
            return whole[:1]
        same = sorted(waiting, key=lambda r: r.start)  # type: ignore[arg-type,return-value]
        for r in same:
            run = _run_of(same, r)
            if span is None or _span(run) == span:
                return run
        return []
