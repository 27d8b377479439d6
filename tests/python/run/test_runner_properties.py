"""Runner invariants on random task graphs and failures, with an in-memory engine (no DuckDB).

For any graph, concurrency and set of failing tasks: a task runs only after all its
dependencies finished, never twice at once; transient failures are retried up to max_attempts;
a task ends done exactly when neither it nor any ancestor failed for good.
"""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import backfill
from backfill.engines import Area, PartitionFingerprint, TaskFailure, WriteResult
from backfill.run.ledger import SqliteLedger
from fake_engines import WriteOnlyEngine


class MemoryEngine(WriteOnlyEngine):
    name = "memory"

    def __init__(
        self, failures: dict[tuple[str, str], tuple[int, bool]], delay: float = 0.001
    ) -> None:
        self.failures = dict(failures)  # (model, day) -> (times left, transient)
        self.delay = delay
        self.log: list[tuple[str, str, float, float]] = []
        self.lock = threading.Lock()
        self.active: set[tuple[str, str]] = set()
        self.overlaps = 0

    def run_task(self, project: Any, model: str, start: Any, end: Any, area: Area) -> WriteResult:
        key = (model, f"{start:%Y-%m-%d}")
        began = time.monotonic()
        with self.lock:
            self.overlaps += key in self.active
            self.active.add(key)
        try:
            time.sleep(self.delay)
            with self.lock:
                left, transient = self.failures.get(key, (0, True))
                if left > 0:
                    self.failures[key] = (left - 1, transient)
                    raise TaskFailure(f"injected {key}", transient=transient)
            return WriteResult(1, 0, PartitionFingerprint(1, f"{0:016x}"), 0.001)
        finally:
            with self.lock:
                self.active.discard(key)
                self.log.append((model, key[1], began, time.monotonic()))


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[backfill.Project, int, dict[tuple[str, str], tuple[int, bool]], int]:
    n = draw(st.integers(1, 4))
    days = draw(st.integers(1, 6))
    p = backfill.Project("prop")
    p.source("raw.t", grain="day", event_time="t")
    for i in range(n):
        parents: list[Any] = ["raw.t"]
        for j in range(i):
            kind = draw(st.sampled_from(["none", "overlap", "window"]))
            if kind == "overlap":
                parents.append(f"m{j}")
            elif kind == "window":
                parents.append(backfill.window(f"m{j}", -draw(st.integers(0, 2)), 0))
        p.model(f"m{i}", depends_on=parents, grain="day", event_time="t", sql="select 1")
    labels = [(dt.date(2026, 3, 1) + dt.timedelta(days=d)).isoformat() for d in range(days + 3)]
    keys = list(itertools.product([f"m{i}" for i in range(n)], labels))
    failing = draw(
        st.dictionaries(
            st.sampled_from(keys), st.tuples(st.integers(1, 3), st.booleans()), max_size=4
        )
    )
    return p, days, failing, draw(st.integers(1, 4))


@settings(max_examples=25, deadline=None)
@given(scenarios())
def test_runner_respects_dependencies_retries_and_failures(
    scenario: tuple[backfill.Project, int, dict[tuple[str, str], tuple[int, bool]], int],
) -> None:
    project, days, failing, concurrency = scenario
    plan = project.plan(
        "*", "2026-03-01", dt.date(2026, 3, 1) + dt.timedelta(days=days), as_of="2026-12-01"
    )
    engine = MemoryEngine(failing)
    with tempfile.TemporaryDirectory() as tmp:
        ledger = SqliteLedger(Path(tmp) / "ledger.sqlite")
        bf = backfill.Backfill.create(
            project, plan, reason="property", engine=engine, ledger=ledger
        )
        status = bf.run(concurrency=concurrency, max_attempts=2, backoff=0.0, poll=0.001)
        tasks = {t.task_id: t for t in bf.tasks()}
        attempts = bf.attempts()
        ledger.close()
    assert engine.overlaps == 0
    # permanent: fails for good (not transient, or more failures than max_attempts allows)
    permanent = {
        t.task_id
        for t in tasks.values()
        if (t.model, t.label) in failing
        and (not failing[(t.model, t.label)][1] or failing[(t.model, t.label)][0] >= 2)
    }
    doomed: set[int] = set()  # failed, or blocked behind a failure (never ran)
    bad: set[int] = set()  # ran and failed for good
    for tid in sorted(tasks, key=lambda i: tasks[i].wave):
        if any(d in doomed for d in tasks[tid].depends_on):
            doomed.add(tid)
        elif tid in permanent:
            doomed.add(tid)
            bad.add(tid)
    assert {i for i, t in tasks.items() if t.status == "done"} == set(tasks) - doomed
    assert {i for i, t in tasks.items() if t.status == "failed"} == bad
    assert status.ok == (not doomed) and status.finished
    finished = {(m, lab): end for m, lab, _, end in engine.log}
    for m, lab, began, _ in engine.log:
        t = next(t for t in tasks.values() if (t.model, t.label) == (m, lab))
        for d in t.depends_on:  # every dependency had finished (successfully) before
            assert tasks[d].status == "done"
            assert finished[(tasks[d].model, tasks[d].label)] <= began
    for t in tasks.values():
        runs = [a for a in attempts if a["task_id"] == t.task_id]
        fails = failing.get((t.model, t.label), (0, True))
        expected = (
            0
            if t.task_id in doomed - bad
            else (1 if not fails[1] and fails[0] else min(fails[0] + 1, 2))
        )
        assert len(runs) == expected, (t, runs, fails)


def test_leases_are_renewed_while_long_tasks_run(tmp_path: Path) -> None:
    """Tasks outlasting the lease are not taken over by a second worker: the heartbeat renews."""
    p = backfill.Project("slow")
    p.source("raw.t", grain="day", event_time="t")
    p.model("m", depends_on=["raw.t"], grain="day", event_time="t", sql="select 1")
    plan = p.plan("m", "2026-03-01", "2026-03-05", as_of="2026-12-01")
    # Each task lasts over twice its lease; the lease is long enough that a loaded machine still
    # renews it in time (renewals every lease/3).
    engine = MemoryEngine({}, delay=1.2)
    first = backfill.Backfill.create(
        p, plan, reason="slow", engine=engine, ledger=SqliteLedger(tmp_path / "ledger.sqlite")
    )
    second = backfill.Backfill(
        p, first.id, ledger=SqliteLedger(tmp_path / "ledger.sqlite"), engine=engine
    )
    results: list[backfill.BackfillStatus] = []
    workers = [
        threading.Thread(
            target=lambda b=b: results.append(b.run(concurrency=2, lease_seconds=0.5, poll=0.01))
        )
        for b in (first, second)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all(r.ok for r in results) and len(results) == 2
    assert engine.overlaps == 0 and len(engine.log) == 4
    assert sorted(a["status"] for a in first.attempts()) == ["done"] * 4
    assert len({a["worker"] for a in first.attempts()}) == 2  # both workers took tasks
