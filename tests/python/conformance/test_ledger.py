"""The ledger conformance suite: what every :class:`~backfill.run.ledger.LedgerBackend` must do.

Every test runs against every backend in :data:`BACKENDS`. A new backend (Postgres, say) is one
more entry there: how to get a fresh, empty ledger URL for one test, and how to make that ledger
look written by a newer schema version. The tests use only the protocol (plus ``open_ledger``),
so they say what callers may rely on, not how a backend stores it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_cases import V1_ROWS, Backend, make_done, publication  # noqa: F401

from backfill.errors import ConflictError, InvalidInputError, NotFoundError
from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
from backfill.run.ledger import (
    SCHEMA_VERSION,
    BackfillCancelledError,
    BackfillExistsError,
    BackfillPausedError,
    BackfillState,
    Claim,
    IllegalTransitionError,
    KeptVersion,
    LedgerBackend,
    LedgerError,
    TaskBusyError,
    TaskEnd,
    TaskRow,
    open_ledger,
)
from backfill.run.ledger import sql as ledger_sql
from backfill.run.ledger.states import BACKFILL_TRANSITIONS
from backfill.versions import KeptModel

# -- helpers -----------------------------------------------------------------------------------
LIVE = "otherhost:1:live"  # a worker on another host: only its lease's expiry tells it is gone
OTHER = "otherhost:2:other"
#: what a done task records (its value does not matter to the ledger)
FP_AB = TaskFingerprint(PartitionFingerprint.of(1, 0xAB))


def record(bid: str) -> dict[str, Any]:
    return {
        "id": bid,
        "project": "p",
        "project_root": None,
        "selection": "m+",
        "exclude": None,
        "start": "2026-01-01",
        "end": "2026-02-01",
        "as_of": None,
        "reason": "test",
        "mode": "audit",
        "engine": "none",
        "plan": "{}",
        "models": "{}",
        "created_by": "me",
    }


def tasks(
    n: int, deps: dict[int, list[int]] | None = None, waves: dict[int, int] | None = None
) -> list[dict[str, Any]]:
    deps, waves = deps or {}, waves or {}
    day = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return [
        {
            "task_id": i,
            "model": "m",
            "start": day + dt.timedelta(days=i),
            "end": day + dt.timedelta(days=i + 1),
            "label": f"p{i}",
            "partitions": 1,
            "wave": waves.get(i, 0),
            "depends_on": deps.get(i, []),
        }
        for i in range(n)
    ]


def finish(
    led: LedgerBackend,
    claim: Claim,
    bid: str,
    worker: str,
    ok: bool = True,
    retry_in: float | None = None,
) -> str:
    end = TaskEnd.success(0.01, 1, 0, FP_AB) if ok else TaskEnd.failure(0.01, "boom", retry_in)
    return led.finish(claim, bid, worker, end)


def ids(claims: list[Claim]) -> list[int]:
    return [c.task.task_id for c in claims]


def status(led: LedgerBackend, bid: str) -> str:
    return str(led.backfill(bid)["status"])


def stamp(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- backfills ---------------------------------------------------------------------------------
def test_create_then_read_back_the_record_and_tasks(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(3, {2: [0, 1]}, {2: 1}))
    rec = ledger.backfill("b1")
    assert {k: rec[k] for k in record("b1")} == {**record("b1"), "models": {}}  # decoded
    assert rec.status is BackfillState.PENDING and rec.finished_at is None
    rows = ledger.tasks("b1")
    assert [(t.task_id, t.label, t.wave, t.status, t.attempts, t.depends_on) for t in rows] == [
        (0, "p0", 0, "pending", 0, ()),
        (1, "p1", 0, "pending", 0, ()),
        (2, "p2", 1, "pending", 0, (0, 1)),
    ]
    assert rows[1].start == dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    assert ledger.attempts("b1") == [] and ledger.audits("b1") == []


def test_a_duplicate_id_is_refused_and_changes_nothing(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(2))
    before = (ledger.backfill("b1"), ledger.tasks("b1"))
    other = {**record("b1"), "reason": "another"}
    with pytest.raises(BackfillExistsError, match="b1"):
        ledger.create_backfill(other, tasks(5))
    assert (ledger.backfill("b1"), ledger.tasks("b1")) == before
    assert [b["id"] for b in ledger.backfills()] == ["b1"]


def test_bad_input_is_refused_before_anything_is_written(ledger: LedgerBackend) -> None:
    incomplete = {k: v for k, v in record("b1").items() if k != "reason"}
    with pytest.raises(InvalidInputError, match="lacks reason"):
        ledger.create_backfill(incomplete, tasks(1))
    with pytest.raises(InvalidInputError, match=r"task ids \[7\]"):
        ledger.create_backfill(record("b1"), tasks(2, {1: [7]}))
    assert ledger.backfills() == []
    ledger.create_backfill(record("b1"), tasks(1))
    with pytest.raises(InvalidInputError, match=r"'bogus'.*expected one of pending"):
        ledger.set_status("b1", "bogus")


def test_an_unknown_id_names_recent_ones(ledger: LedgerBackend) -> None:
    with pytest.raises(NotFoundError, match="recent: none"):
        ledger.backfill("nope")
    for bid in ("b1", "b2"):
        ledger.create_backfill(record(bid), tasks(1))
    with pytest.raises(NotFoundError, match=r"no backfill 'nope'.*recent: b2, b1"):
        ledger.backfill("nope")
    with pytest.raises(NotFoundError, match="nope"):
        ledger.set_status("nope", "running")


def test_latest_and_backfills_are_newest_first(ledger: LedgerBackend) -> None:
    assert ledger.latest() is None and ledger.backfills() == []
    for bid in ("b1", "b2", "b3"):
        ledger.create_backfill(record(bid), tasks(1))
        time.sleep(0.002)  # distinct creation stamps (milliseconds)
    assert ledger.latest() == "b3"
    assert [b["id"] for b in ledger.backfills()] == ["b3", "b2", "b1"]
    assert [b["id"] for b in ledger.backfills(limit=2)] == ["b3", "b2"]


# -- claims, dependencies, leases --------------------------------------------------------------
def test_claim_waits_for_every_dependency(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(4, {2: [0, 1]}, {2: 1}))
    first = ledger.claim("b1", LIVE, 10, 60)
    assert ids(first) == [0, 1, 3] and all(c.attempt == 1 for c in first)
    assert [t.status for t in ledger.tasks("b1")] == ["running", "running", "pending", "running"]
    assert finish(ledger, first[0], "b1", LIVE) == "done"
    assert ledger.claim("b1", OTHER, 10, 60) == []  # task 1 is not done yet
    assert finish(ledger, first[1], "b1", LIVE) == "done"
    assert ids(ledger.claim("b1", OTHER, 10, 60)) == [2]


def test_claim_takes_at_most_limit_in_wave_order(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(4, waves={0: 2, 1: 1, 3: 0}))
    assert ledger.claim("b1", LIVE, 0, 60) == []
    assert ids(ledger.claim("b1", LIVE, 2, 60)) == [2, 3]  # wave 0 first
    assert ids(ledger.claim("b1", LIVE, 2, 60)) == [1, 0]
    assert ledger.claim("b1", LIVE, 2, 60) == []


def test_an_expired_lease_is_taken_over_and_the_late_finish_is_lost(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    (first,) = ledger.claim("b1", LIVE, 1, lease_seconds=0.2)
    assert ledger.claim("b1", OTHER, 1, 60) == []  # held
    time.sleep(0.3)
    (second,) = ledger.claim("b1", OTHER, 1, 60)
    assert (second.task.task_id, second.attempt) == (0, 2)
    assert finish(ledger, first, "b1", LIVE) == "lost"
    assert ledger.tasks("b1")[0].status == "running"  # still the other worker's
    assert [a["status"] for a in ledger.attempts("b1")] == ["abandoned", "running"]
    assert finish(ledger, second, "b1", OTHER) == "done"
    assert [a["status"] for a in ledger.attempts("b1")] == ["abandoned", "done"]
    assert ledger.tasks("b1")[0].status == "done"


def test_renew_keeps_a_lease_past_its_first_expiry(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(2))
    claims = ledger.claim("b1", LIVE, 1, lease_seconds=0.3)
    ledger.renew("b1", LIVE, [0], 1.0)
    ledger.renew("b1", OTHER, [0], 0.0)  # a worker renews only its own leases
    time.sleep(0.4)
    assert ids(ledger.claim("b1", OTHER, 2, 60)) == [1]  # task 0 stays the live worker's
    assert ledger.live_workers("b1") == {LIVE, OTHER}
    assert finish(ledger, claims[0], "b1", LIVE) == "done"
    assert ledger.renew("b1", LIVE, [], 1.0) == 0  # nothing to renew is fine


def test_renew_counts_the_leases_still_held(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(3))
    ledger.claim("b1", LIVE, 2, lease_seconds=0.2)
    assert ledger.renew("b1", LIVE, [0, 1, 2], 0.2) == 2  # task 2 was never its
    time.sleep(0.3)
    assert ids(ledger.claim("b1", OTHER, 1, 60)) == [0]  # both expired: the other takes task 0
    # Renewing tells the first worker it lost task 0 (its result must not land), and never
    # takes the task back.
    assert ledger.renew("b1", LIVE, [0], 60) == 0
    assert ledger.live_workers("b1") == {OTHER}


def test_a_dead_worker_on_this_host_loses_its_lease_at_once(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    dead = f"{socket.gethostname()}:{exited_pid()}:gone"
    ledger.claim("b1", dead, 1, 600)
    assert ledger.live_workers("b1") == set()
    (again,) = ledger.claim("b1", OTHER, 1, 60)
    assert again.attempt == 2
    assert [a["status"] for a in ledger.attempts("b1")] == ["abandoned", "running"]


def test_live_workers_are_the_holders_of_unexpired_leases(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(3))
    assert ledger.live_workers("b1") == set()
    mine = ledger.claim("b1", LIVE, 2, 60)
    ledger.claim("b1", OTHER, 1, 0.05)
    assert ledger.live_workers("b1") == {LIVE, OTHER}
    time.sleep(0.1)
    assert ledger.live_workers("b1") == {LIVE}
    for c in mine:
        finish(ledger, c, "b1", LIVE)
    assert ledger.live_workers("b1") == set()


def test_claim_task(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(3, {1: [0]}))
    with pytest.raises(ConflictError, match=r"depends on tasks not done: m p0 \(task 0"):
        ledger.claim_task("b1", 1, LIVE, 60)
    with pytest.raises(NotFoundError, match="no task 9"):
        ledger.claim_task("b1", 9, LIVE, 60)
    claim = ledger.claim_task("b1", 0, LIVE, 60)
    assert isinstance(claim, Claim) and claim.attempt == 1
    with pytest.raises(TaskBusyError, match=f"running in worker {LIVE}"):
        ledger.claim_task("b1", 0, OTHER, 60)
    assert finish(ledger, claim, "b1", LIVE) == "done"
    row = ledger.claim_task("b1", 0, OTHER, 60)
    assert isinstance(row, TaskRow) and row.status == "done"  # nothing to run
    failing = ledger.claim_task("b1", 2, LIVE, 60)
    assert isinstance(failing, Claim)
    assert finish(ledger, failing, "b1", LIVE, ok=False) == "failed"
    retried = ledger.claim_task("b1", 2, OTHER, 60)  # the orchestrator retries a failed task
    assert isinstance(retried, Claim) and retried.attempt == 2
    assert len(ledger.attempts("b1")) == 3  # a done task's claim starts no attempt


# -- failures and retries ----------------------------------------------------------------------
def test_a_retry_waits_for_its_time(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    (claim,) = ledger.claim("b1", LIVE, 1, 60)
    assert finish(ledger, claim, "b1", LIVE, ok=False, retry_in=0.3) == "pending"
    row = ledger.tasks("b1")[0]
    assert (row.status, row.error) == ("pending", "boom")
    assert ledger.claim("b1", LIVE, 1, 60) == []
    time.sleep(0.35)
    (again,) = ledger.claim("b1", LIVE, 1, 60)
    assert again.attempt == 2
    assert finish(ledger, again, "b1", LIVE) == "done"
    assert [a["status"] for a in ledger.attempts("b1")] == ["failed", "done"]


def test_the_recorded_gap_before_a_retry_is_never_under_its_delay(ledger: LedgerBackend) -> None:
    # The stamps users read (finished_at of the failure, started_at of the retry) show at least
    # the delay, claimed as early as the ledger allows: a CI run once recorded 99 ms for a
    # backoff of 100 ms (the due time came from the worker's clock, read before the ledger
    # stamped the end, and the stamps are cut to milliseconds).
    delay = 0.013  # an odd number of milliseconds
    ledger.create_backfill(record("b1"), tasks(1))
    (claim,) = ledger.claim("b1", LIVE, 1, 60)
    for _ in range(8):
        assert finish(ledger, claim, "b1", LIVE, ok=False, retry_in=delay) == "pending"
        deadline = time.monotonic() + 5
        while not (got := ledger.claim("b1", LIVE, 1, 60)):
            assert time.monotonic() < deadline, "the retry never became due"
        (claim,) = got
    attempts = ledger.attempts("b1")
    assert [a["attempt"] for a in attempts] == list(range(1, 10))
    gaps = [
        dt.datetime.fromisoformat(b["started_at"]) - dt.datetime.fromisoformat(a["finished_at"])
        for a, b in itertools.pairwise(attempts)
    ]
    assert min(gaps) >= dt.timedelta(seconds=delay), gaps
    assert max(gaps) < dt.timedelta(seconds=2), gaps  # due soon after, not at some later tick


def test_a_failure_without_retry_fails_until_reset(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(2))
    a, b = ledger.claim("b1", LIVE, 2, 60)
    assert finish(ledger, a, "b1", LIVE, ok=False) == "failed"
    assert finish(ledger, b, "b1", LIVE) == "done"
    assert finish(ledger, b, "b1", LIVE) == "lost"  # finishing twice does not count twice
    assert ledger.claim("b1", LIVE, 2, 60) == []  # claim does not retry failed tasks
    assert ledger.reset_failed("b1") == 1
    assert ledger.reset_failed("b1") == 0
    assert [(t.status, t.attempts) for t in ledger.tasks("b1")] == [("pending", 0), ("done", 1)]
    assert ids(ledger.claim("b1", LIVE, 2, 60)) == [0]


def test_a_task_back_to_pending_comes_before_later_ones_whoever_sent_it_back(
    ledger: LedgerBackend, url: str
) -> None:
    # A Postgres claimer starts its scan past the tasks it saw claimed (schema version 10): a
    # task another handle sends back to pending below that point -- a retry, an expired lease
    # dropped, a reset of failed tasks -- is still the next one claimed, on every backend.
    ledger.create_backfill(record("b1"), tasks(12))
    other = open_ledger(url)
    try:
        mine = [ledger.claim("b1", LIVE, 1, 60)[0] for _ in range(3)]
        assert ids(mine) == [0, 1, 2]
        theirs = other.claim("b1", OTHER, 2, 60)
        assert ids(theirs) == [3, 4]
        assert ids(ledger.claim("b1", LIVE, 1, 60)) == [5]
        # a retry due now, sent back by the other handle
        assert finish(other, theirs[0], "b1", OTHER, ok=False, retry_in=0) == "pending"
        (again,) = ledger.claim("b1", LIVE, 1, 60)
        assert (again.task.task_id, again.attempt) == (3, 2)
        assert ids(ledger.claim("b1", LIVE, 1, 60)) == [6]
        # expired leases, dropped by the other handle's claim, which takes the first of them
        assert ids(other.claim("b1", OTHER, 2, lease_seconds=0.2)) == [7, 8]
        assert ids(ledger.claim("b1", LIVE, 1, 60)) == [9]
        time.sleep(0.3)
        assert ids(other.claim("b1", OTHER, 1, 60)) == [7]
        assert ids(ledger.claim("b1", LIVE, 1, 60)) == [8]
        # a reset of failed tasks by the other handle
        assert finish(other, theirs[1], "b1", OTHER, ok=False) == "failed"
        assert ids(ledger.claim("b1", LIVE, 1, 60)) == [10]
        assert other.reset_failed("b1") == 1
        assert ids(ledger.claim("b1", LIVE, 5, 60)) == [4, 11]
        assert ledger.claim("b1", LIVE, 5, 60) == []
    finally:
        other.close()
    assert [t.status for t in ledger.tasks("b1")] == ["running"] * 12


# -- exactly once, across processes ------------------------------------------------------------
WORKER = r"""
import json, sys, time
from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
from backfill.run.ledger import TaskEnd, new_worker_id, open_ledger

url, bid, stall = sys.argv[1], sys.argv[2], {int(s) for s in sys.argv[3].split(",")}
ledger, me, out = open_ledger(url), new_worker_id(), []
FP = TaskFingerprint(PartitionFingerprint.of(1, 1))
while True:
    claims = ledger.claim(bid, me, 2, 0.5)
    if not claims:
        if all(t.status == "done" for t in ledger.tasks(bid)):
            break
        time.sleep(0.01)
        continue
    for c in claims:
        if c.task.task_id in stall and c.attempt == 1:
            # Stalls past its lease until another worker has taken the task over (its claim
            # marks this attempt abandoned). Waiting for that, not for a fixed time: on a loaded
            # machine the other workers may start later than any fixed stall lasts.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any(
                    a["task_id"] == c.task.task_id and a["status"] == "abandoned"
                    for a in ledger.attempts(bid)):
                time.sleep(0.05)
        elif c.task.task_id in stall:
            time.sleep(0.4)  # the takeover is still running when the stalled worker reports
        outcome = ledger.finish(c, bid, me, TaskEnd.success(0.0, 1, 0, FP))
        out.append([c.task.task_id, outcome])
print(json.dumps(out))
"""


def test_processes_run_every_task_exactly_once(ledger: LedgerBackend, url: str) -> None:
    n, stalled = 300, [5, 150]
    deps = {i: [i - 100] + ([i - 99] if i % 7 == 0 else []) for i in range(100, n)}
    ledger.create_backfill(record("b1"), tasks(n, deps, {i: i // 100 for i in range(n)}))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, "b1", ",".join(map(str, stalled))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outcomes: dict[int, list[str]] = {}
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        for task_id, outcome in json.loads(out):
            outcomes.setdefault(task_id, []).append(outcome)

    assert all(t.status == "done" for t in ledger.tasks("b1"))
    assert all(outcomes[i].count("done") == 1 for i in range(n)), "a task finished twice"
    attempts: dict[int, list[dict[str, Any]]] = {}
    for a in ledger.attempts("b1"):
        attempts.setdefault(a["task_id"], []).append(a)
    done_at: dict[int, dict[str, Any]] = {}
    for task_id, rows in attempts.items():
        assert [r["status"] for r in rows].count("done") == 1
        done_at[task_id] = next(r for r in rows if r["status"] == "done")
        for before, after in itertools.pairwise(rows):  # attempts of a task never overlap
            assert stamp(before["finished_at"]) <= stamp(after["started_at"])
    for task_id in stalled:  # the stalls were taken over; their late finishes were refused
        assert "abandoned" in [r["status"] for r in attempts[task_id]]
        assert "lost" in outcomes[task_id]
    for task_id, task_deps in deps.items():  # no task started before its dependencies were done
        started = stamp(done_at[task_id]["started_at"])
        assert all(stamp(done_at[d]["finished_at"]) <= started for d in task_deps)


# -- the backfill lifecycle --------------------------------------------------------------------
def _apply(ledger: LedgerBackend, bid: str, target: BackfillState) -> None:
    if target is BackfillState.PUBLISHED:  # only record_publication publishes
        ledger.record_publication(bid, publication())
    elif target is BackfillState.CANCELLED:  # only cancel cancels (with a reason)
        ledger.cancel(bid, "wrong period", "me")
    else:
        ledger.set_status(bid, target, finished=target is BackfillState.DONE)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(list(BackfillState)), max_size=8))
def test_backfill_transitions_follow_the_table(
    ledger: LedgerBackend, moves: list[BackfillState]
) -> None:
    # Each example gets its own backfill, so sharing the test's ledger across examples is sound.
    bid = f"b_{uuid.uuid4().hex[:8]}"
    ledger.create_backfill(record(bid), tasks(1))
    for target in moves:
        before = ledger.backfill(bid)
        current = BackfillState(before["status"])
        allowed = target in BACKFILL_TRANSITIONS[current] or (
            target == current and target not in (BackfillState.PUBLISHED, BackfillState.CANCELLED)
        )
        if allowed:
            _apply(ledger, bid, target)
            assert status(ledger, bid) == target
            if current.final:  # staying in a final state writes nothing
                assert ledger.backfill(bid) == before
        else:
            with pytest.raises(IllegalTransitionError, match=f"backfill {bid} is {current}"):
                _apply(ledger, bid, target)
            assert ledger.backfill(bid) == before
    published = ledger.publications(bid)
    assert len(published) == (status(ledger, bid) == BackfillState.PUBLISHED)


def test_published_and_discarded_are_final(ledger: LedgerBackend) -> None:
    for bid in ("b1", "b2"):
        ledger.create_backfill(record(bid), tasks(1))
        make_done(ledger, bid)
    ledger.record_publication("b1", publication())
    ledger.set_status("b2", "discarded", finished=True)
    for bid, final in (("b1", "published"), ("b2", "discarded")):
        for target in ("pending", "running", "done", "failed"):
            with pytest.raises(IllegalTransitionError, match=f"is {final}; it cannot become"):
                ledger.set_status(bid, target)
        assert status(ledger, bid) == final
    with pytest.raises(IllegalTransitionError, match="is published"):
        ledger.set_status("b1", "discarded")
    with pytest.raises(IllegalTransitionError, match="is discarded"):
        ledger.record_publication("b2", publication())
    with pytest.raises(InvalidInputError, match="record_publication"):
        ledger.set_status("b1", "published")


def test_finished_at_is_stamped_kept_by_publication_and_cleared_by_a_rerun(
    ledger: LedgerBackend,
) -> None:
    for bid in ("b1", "b2"):
        ledger.create_backfill(record(bid), tasks(1))
        make_done(ledger, bid)
    done = ledger.backfill("b1")["finished_at"]
    assert done is not None
    ledger.record_publication("b1", publication())
    assert ledger.backfill("b1")["finished_at"] == done
    ledger.set_status("b2", "running")
    assert ledger.backfill("b2")["finished_at"] is None


# -- pause, cancel, options (any process) -----------------------------------------------------
def test_pause_stops_claims_until_resumed_and_running_tasks_finish(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(3))
    (first,) = ledger.claim("b1", LIVE, 1, 60)
    ledger.set_paused("b1", True, "ops")
    rec = ledger.backfill("b1")
    assert rec["paused_by"] == "ops" and rec["paused_at"] is not None
    assert ledger.claim("b1", OTHER, 5, 60) == [] and ledger.ready("b1", 5) == []
    with pytest.raises(BackfillPausedError, match=r"b1 is paused .*backfill resume b1"):
        ledger.claim_task("b1", 1, OTHER, 60)
    assert finish(ledger, first, "b1", LIVE) == "done"  # a running task finishes
    with pytest.raises(IllegalTransitionError, match="paused already"):
        ledger.set_paused("b1", True, "ops")
    ledger.set_paused("b1", False, "ops")
    assert ledger.backfill("b1")["paused_at"] is None
    assert [t.task_id for t in ledger.ready("b1", 5)] == [1, 2]
    assert ids(ledger.claim("b1", OTHER, 5, 60)) == [1, 2]  # ready lists, claim takes
    with pytest.raises(IllegalTransitionError, match="b1 is pending, not paused"):
        ledger.set_paused("b1", False, "ops")


def test_an_interrupted_backfill_keeps_its_tasks_and_resumes(ledger: LedgerBackend) -> None:
    # A runner stopped by a signal: its finished task stays done, its interrupted one pending
    # (failed attempt, due now), the backfill interrupted; a resume runs the rest.
    ledger.create_backfill(record("b1"), tasks(2))
    ledger.set_status("b1", "running")
    first, second = ledger.claim("b1", LIVE, 2, 60)
    assert finish(ledger, first, "b1", LIVE) == "done"
    assert (
        ledger.finish(second, "b1", LIVE, TaskEnd.failure(0.1, "interrupted by SIGTERM", 0))
        == "pending"
    )
    ledger.set_status("b1", "interrupted")
    assert status(ledger, "b1") == "interrupted" and not ledger.live_workers("b1")
    ledger.set_paused("b1", True, "ops")  # an interrupted backfill may be held...
    assert ledger.claim("b1", OTHER, 5, 60) == []
    ledger.set_paused("b1", False, "ops")
    ledger.set_status("b1", "running")  # ...and resumed
    (again,) = ledger.claim("b1", OTHER, 5, 60)
    assert (again.task.task_id, again.attempt) == (second.task.task_id, 2)
    assert finish(ledger, again, "b1", OTHER) == "done"
    ledger.set_status("b1", "done", finished=True)
    assert [a["status"] for a in ledger.attempts("b1")] == ["done", "failed", "done"]


def test_a_finished_backfill_cannot_be_paused(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    make_done(ledger, "b1")
    before = ledger.backfill("b1")
    with pytest.raises(
        IllegalTransitionError,
        match="b1 is done; only a pending, running, interrupted or failed backfill can be paused",
    ):
        ledger.set_paused("b1", True, "ops")
    assert ledger.backfill("b1") == before
    with pytest.raises(NotFoundError, match="nope"):
        ledger.set_paused("nope", True, "ops")


def test_cancel_stops_claims_keeps_the_record_and_only_discard_follows(
    ledger: LedgerBackend,
) -> None:
    ledger.create_backfill(record("b1"), tasks(2))
    ledger.set_status("b1", BackfillState.RUNNING)
    (running,) = ledger.claim("b1", LIVE, 1, 60)
    ledger.set_paused("b1", True, "ops")
    with pytest.raises(InvalidInputError, match="needs a reason"):
        ledger.cancel("b1", " ", "ops")
    with pytest.raises(InvalidInputError, match="only through cancel"):
        ledger.set_status("b1", "cancelled")
    ledger.cancel("b1", "wrong period", "ops")
    rec = ledger.backfill("b1")
    assert (rec["status"], rec["cancel_reason"], rec["cancelled_by"], rec["paused_at"]) == (
        "cancelled",
        "wrong period",
        "ops",
        None,
    )
    assert ledger.claim("b1", OTHER, 5, 60) == [] and ledger.ready("b1", 5) == []
    with pytest.raises(BackfillCancelledError, match="b1 is cancelled"):
        ledger.claim_task("b1", 1, OTHER, 60)
    assert finish(ledger, running, "b1", LIVE) == "done"  # the running task's end is recorded
    for target in ("running", "done", "failed"):
        with pytest.raises(IllegalTransitionError, match="b1 is cancelled; it cannot become"):
            ledger.set_status("b1", target)
    with pytest.raises(IllegalTransitionError, match="cancelled already"):
        ledger.cancel("b1", "again", "ops")
    with pytest.raises(IllegalTransitionError, match="b1 is cancelled"):
        ledger.record_publication("b1", publication())
    ledger.set_status("b1", "discarded", finished=True)
    assert status(ledger, "b1") == "discarded"


def test_a_published_backfill_cannot_be_cancelled(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    make_done(ledger, "b1")
    ledger.record_publication("b1", publication())
    before = ledger.backfill("b1")
    with pytest.raises(IllegalTransitionError, match="b1 is published; it cannot become cancelled"):
        ledger.cancel("b1", "too late", "ops")
    assert ledger.backfill("b1") == before


def test_options_are_recorded_at_create_and_replaced(ledger: LedgerBackend) -> None:
    opts = {"windows": ["22:00-06:00 Europe/Berlin"], "budget_seconds": 10800.0}
    ledger.create_backfill({**record("b1"), "options": json.dumps(opts)}, tasks(1))
    ledger.create_backfill(record("b2"), tasks(1))  # options are optional
    assert ledger.backfill("b1").options == opts  # decoded once, when read
    assert ledger.backfill("b2").options == {}
    ledger.set_options("b2", {"budget_seconds": 60.0})
    assert ledger.backfill("b2").options == {"budget_seconds": 60.0}
    with pytest.raises(NotFoundError, match="nope"):
        ledger.set_options("nope", {})


# -- audits and publications -------------------------------------------------------------------
def test_audits_roundtrip(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    ledger.record_audit(
        "b1",
        "aud1",
        "2026-02-01T00:00:00+00:00",
        "me",
        [
            {
                "model": "m",
                "passed": True,
                "published_fingerprints": {"p0": PartitionFingerprint.of(1, 0xAB)},
                "result": {"gates": [], "rows": 3, "when": dt.date(2026, 1, 1)},
            },
            {"model": "n", "passed": 0, "published_fingerprints": {}, "result": {"gates": ["x"]}},
        ],
    )
    rows = ledger.audits("b1")
    assert [(r.model, r.passed, r.created_by) for r in rows] == [
        ("m", True, "me"),
        ("n", False, "me"),
    ]
    assert rows[0].published_fingerprints == {"p0": PartitionFingerprint.of(1, 0xAB)}
    assert rows[0].audit_id == "aud1"
    assert rows[0].result == {
        "audit_id": "aud1",
        "gates": [],
        "rows": 3,
        "when": "2026-01-01",
    }
    with pytest.raises(NotFoundError, match="nope"):
        ledger.record_audit("nope", "aud2", "2026-02-01T00:00:00+00:00", "me", [])
    with pytest.raises(InvalidInputError, match="lacks passed"):
        ledger.record_audit("b1", "aud3", "2026-02-01T00:00:00+00:00", "me", [{"model": "m"}])
    assert len(ledger.audits("b1")) == 2


def test_record_publication_publishes_a_done_backfill_in_one_step(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    ledger.create_backfill(record("b2"), tasks(1))
    with pytest.raises(IllegalTransitionError, match="b1 is pending"):
        ledger.record_publication("b1", publication())
    assert ledger.publications("b1") == [] and status(ledger, "b1") == "pending"
    make_done(ledger, "b1")
    ledger.record_publication("b1", publication("pub_1"))
    assert status(ledger, "b1") == "published"
    (row,) = ledger.publications("b1")
    assert (row["backfill_id"], row["published_by"], row["note"]) == ("b1", "me", "fixed")
    assert (row.publication_id, row.models) == ("pub_1", {"m": ["p0"]})
    with pytest.raises(IllegalTransitionError, match="b1 is published"):
        ledger.record_publication("b1", publication("pub_2"))  # never published twice
    make_done(ledger, "b2")
    ledger.record_publication("b2", publication("pub_3"))
    assert [p["backfill_id"] for p in ledger.publications()] == ["b1", "b2"]


# -- kept versions and rollbacks (schema version 7) --------------------------------------------
UTC = dt.timezone.utc
CEST = dt.timezone(dt.timedelta(hours=2))


def day(d: int, tz: dt.timezone = UTC) -> dt.datetime:
    return dt.datetime(2026, 8, d, tzinfo=tz)


def kept_models() -> tuple[KeptModel, ...]:
    """One model of every strategy, with every field set somewhere (and None elsewhere)."""
    return (
        KeptModel(
            "fct_sales",
            "replace",
            True,
            (("2026-08-03", day(3), day(4)), ("2026-08-04", day(4, CEST), day(5, CEST))),
            after={
                "2026-08-03": PartitionFingerprint.of(12, 0xFEDC_BA98_7654_3210),
                "2026-08-04": PartitionFingerprint.of(0, 0),
            },
            rows=12,
        ),
        KeptModel(
            "dim_customer",
            "merge",
            True,
            keys=("customer_id", "region"),
            after={"__all__": PartitionFingerprint.of(3, 0xAB)},
            rows=3,
        ),
        KeptModel("fct_iceberg", "full", True, rows=40, snapshot=8_123_456_789_012_345_678),
        KeptModel("fct_first", "full", False),  # a first build: a rollback drops it
        KeptModel("v_sales", "view", True, definition="SELECT 'it''s' AS x -- ünïcode"),
        KeptModel("v_new", "view", False, definition=None),
    )


def kept(
    pid: str,
    bid: str = "b1",
    *,
    rolls_back: str | None = None,
    at: str = "2026-08-03T10:00:00+00:00",
    until: str | None = "2026-09-02T10:00:00+00:00",
    models: tuple[KeptModel, ...] | None = None,
) -> KeptVersion:
    return KeptVersion(
        publication_id=pid,
        backfill_id=bid,
        kind="publish" if rolls_back is None else "rollback",
        rolls_back=rolls_back,
        published_at=at,
        keep_until=until,
        models=kept_models() if models is None else models,
    )


def published(ledger: LedgerBackend, bid: str, pid: str, **kw: Any) -> KeptVersion:
    """Backfill ``bid`` created, done and published as ``pid`` with what it kept."""
    ledger.create_backfill(record(bid), tasks(1))
    make_done(ledger, bid)
    version = kept(pid, bid, **kw)
    ledger.record_publication(bid, publication(pid), kept=version)
    return version


def test_a_publication_keeps_what_it_replaced_and_reads_it_back(ledger: LedgerBackend) -> None:
    mine = published(ledger, "b1", "pub_1")
    assert status(ledger, "b1") == "published"
    assert [p.publication_id for p in ledger.publications("b1")] == ["pub_1"]
    back = ledger.kept_version("pub_1")
    assert back == mine  # every field, every model
    assert (back.kind, back.rolls_back, back.rolled_back_by, back.dropped_at) == (
        "publish",
        None,
        None,
        None,
    )
    assert (back.published_at, back.keep_until) == (
        "2026-08-03T10:00:00+00:00",
        "2026-09-02T10:00:00+00:00",
    )
    sales = back.model("fct_sales")
    assert sales.after == {
        "2026-08-03": PartitionFingerprint.of(12, 0xFEDC_BA98_7654_3210),
        "2026-08-04": PartitionFingerprint.of(0, 0),
    }
    assert [(label, s.utcoffset(), e) for label, s, e in sales.parts] == [
        ("2026-08-03", dt.timedelta(0), day(3, UTC) + dt.timedelta(days=1)),
        ("2026-08-04", dt.timedelta(hours=2), day(5, CEST)),
    ]
    assert back.model("dim_customer").keys == ("customer_id", "region")
    assert back.model("fct_iceberg").snapshot == 8_123_456_789_012_345_678
    assert back.model("fct_first").existed is False
    assert back.model("fct_first").snapshot is None and back.model("fct_first").rows == 0
    assert back.model("v_sales").definition == "SELECT 'it''s' AS x -- ünïcode"
    assert back.model("v_new").definition is None
    with pytest.raises(NotFoundError, match=r"kept nothing of model 'nope'; it kept: fct_sales"):
        back.model("nope")
    assert not back.expired(day(3)) and back.expired(dt.datetime(2026, 9, 2, 10, tzinfo=UTC))

    # keep: 0 keeps nothing; listed oldest first, per backfill or all
    nothing = published(
        ledger, "b2", "pub_0", at="2026-08-01T00:00:00+00:00", until=None, models=()
    )
    assert ledger.kept_version("pub_0") == nothing and nothing.expired(day(1))
    assert [k.publication_id for k in ledger.kept_versions()] == ["pub_0", "pub_1"]
    assert ledger.kept_versions("b1") == [mine] and ledger.kept_versions("b2") == [nothing]
    assert ledger.kept_versions("nope") == []


def test_a_mismatched_kept_version_is_refused_and_writes_nothing(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(1))
    make_done(ledger, "b1")
    refusals = [
        (kept("pub_other"), r"publication_id 'pub_other' \(the publication's: 'pub_1'\)"),
        (kept("pub_1", "b2"), r"backfill_id 'b2' \(the publication's: 'b1'\)"),
        (kept("pub_1", rolls_back="pub_0"), r"kind 'rollback'; expected 'publish'"),
        (
            dataclasses.replace(kept("pub_1"), dropped_at="2026-08-04T00:00:00+00:00"),
            r"dropped_at '2026-08-04T00:00:00\+00:00'; a new one has neither",
        ),
    ]
    for bad, message in refusals:
        with pytest.raises(InvalidInputError, match=message):
            ledger.record_publication("b1", publication("pub_1"), kept=bad)
        assert status(ledger, "b1") == "done"
        assert ledger.publications() == [] and ledger.kept_versions() == []
        with pytest.raises(NotFoundError, match="no publication 'pub_1'"):
            ledger.kept_version("pub_1")
    ledger.record_publication("b1", publication("pub_1"), kept=kept("pub_1"))
    assert [k.publication_id for k in ledger.kept_versions()] == ["pub_1"]
    # An id taken already (by another backfill's publication): refused, nothing written.
    ledger.create_backfill(record("b2"), tasks(1))
    make_done(ledger, "b2")
    with pytest.raises(ConflictError, match="pub_1 is recorded already"):
        ledger.record_publication("b2", publication("pub_1"), kept=kept("pub_1", "b2"))
    assert status(ledger, "b2") == "done" and ledger.publications("b2") == []
    assert ledger.kept_version("pub_1").backfill_id == "b1"


def test_a_rollback_takes_a_publication_back_once(ledger: LedgerBackend) -> None:
    published(ledger, "b1", "pub_1")
    rb = kept("rb_1", rolls_back="pub_1", at="2026-08-04T10:00:00+00:00", models=kept_models()[:1])
    ledger.record_rollback(rb)
    assert ledger.kept_version("pub_1").rolled_back_by == "rb_1"
    assert ledger.kept_version("rb_1") == rb
    assert (rb.kind, rb.rolls_back, rb.rolled_back_by) == ("rollback", "pub_1", None)
    assert status(ledger, "b1") == "published"  # a rollback leaves the backfill's status
    assert [p.publication_id for p in ledger.publications()] == ["pub_1"]

    again = kept("rb_2", rolls_back="pub_1", at="2026-08-05T10:00:00+00:00")
    with pytest.raises(ConflictError, match="publication pub_1 was already rolled back by rb_1"):
        ledger.record_rollback(again)
    with pytest.raises(NotFoundError, match="rb_2"):
        ledger.kept_version("rb_2")
    assert ledger.kept_version("pub_1").rolled_back_by == "rb_1"

    # A rollback of the rollback publishes the version it took back again: a chain.
    ledger.record_rollback(kept("rb_3", rolls_back="rb_1", at="2026-08-06T10:00:00+00:00"))
    chain = [(k.publication_id, k.rolls_back, k.rolled_back_by) for k in ledger.kept_versions()]
    assert chain == [("pub_1", None, "rb_1"), ("rb_1", "pub_1", "rb_3"), ("rb_3", "rb_1", None)]
    with pytest.raises(ConflictError, match="publication rb_1 was already rolled back by rb_3"):
        ledger.record_rollback(kept("rb_4", rolls_back="rb_1", at="2026-08-07T10:00:00+00:00"))

    # refused, and nothing written: not a rollback, another backfill's id, an unknown one
    with pytest.raises(InvalidInputError, match=r"kind 'publish'; expected 'rollback'"):
        ledger.record_rollback(kept("rb_5"))
    with pytest.raises(InvalidInputError, match=r"rb_6: backfill_id 'b9'.*of backfill 'b1'"):
        ledger.record_rollback(kept("rb_6", "b9", rolls_back="rb_3"))
    with pytest.raises(NotFoundError, match=r"rb_7: no publication 'pub_nope'"):
        ledger.record_rollback(kept("rb_7", rolls_back="pub_nope"))
    assert [k.publication_id for k in ledger.kept_versions()] == ["pub_1", "rb_1", "rb_3"]
    assert ledger.kept_version("rb_3").rolled_back_by is None


def _roll_back_at_barrier(
    url: str, version: KeptVersion, barrier: threading.Barrier, outcome: dict[str, str]
) -> None:
    try:
        led = open_ledger(url)
    except Exception as exc:  # said in the outcome; the other thread's barrier then breaks
        barrier.abort()
        outcome[version.publication_id] = f"error: {exc!r}"
        return
    try:
        barrier.wait()
        led.record_rollback(version)
        outcome[version.publication_id] = "recorded"
    except ConflictError as exc:
        outcome[version.publication_id] = f"refused: {exc}"
    except Exception as exc:  # anything else fails the test, with what it was
        outcome[version.publication_id] = f"error: {exc!r}"
    finally:
        led.close()


def test_of_two_rollbacks_of_one_publication_at_once_one_is_refused(
    ledger: LedgerBackend, url: str
) -> None:
    """Check and write are one step: each round starts both rollbacks together."""
    for round_ in range(4):
        pid = f"pub_{round_}"
        published(ledger, f"b{round_}", pid)
        barrier = threading.Barrier(2, timeout=60)
        outcome: dict[str, str] = {}
        threads = [
            threading.Thread(
                target=_roll_back_at_barrier,
                args=(
                    url,
                    kept(f"rb_{round_}_{i}", f"b{round_}", rolls_back=pid),
                    barrier,
                    outcome,
                ),
            )
            for i in (1, 2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(outcome) == 2 and not any(v.startswith("error") for v in outcome.values()), (
            outcome
        )
        (winner,) = [rid for rid, said in outcome.items() if said == "recorded"]
        (loser,) = [rid for rid in outcome if rid != winner]
        assert outcome[loser] == f"refused: publication {pid} was already rolled back by {winner}"
        assert ledger.kept_version(pid).rolled_back_by == winner
        with pytest.raises(NotFoundError, match=loser):
            ledger.kept_version(loser)
    assert len(ledger.kept_versions()) == 8


def test_unknown_ids_are_not_found(ledger: LedgerBackend) -> None:
    with pytest.raises(NotFoundError, match=r"no publication 'nope' .*`backfill changelog`"):
        ledger.kept_version("nope")
    with pytest.raises(NotFoundError, match="no publication 'nope'"):
        ledger.mark_dropped("nope", "2026-08-04T00:00:00+00:00")
    with pytest.raises(NotFoundError, match="no publication 'nope'"):
        ledger.record_rollback(kept("rb_1", rolls_back="nope"))
    # A publication recorded without a kept version (keeps nothing the ledger knows of)
    ledger.create_backfill(record("b1"), tasks(1))
    make_done(ledger, "b1")
    ledger.record_publication("b1", publication("pub_1"))
    with pytest.raises(NotFoundError, match="publication pub_1 kept nothing the ledger knows of"):
        ledger.kept_version("pub_1")
    with pytest.raises(NotFoundError, match="no publication 'pub_1'"):
        ledger.record_rollback(kept("rb_1", rolls_back="pub_1"))
    assert ledger.kept_versions() == []


def test_mark_dropped_keeps_the_first_time(ledger: LedgerBackend) -> None:
    published(ledger, "b1", "pub_1")
    published(ledger, "b2", "pub_2")
    first, later = "2026-09-02T10:00:00+00:00", "2026-09-03T00:00:00+00:00"
    ledger.mark_dropped("pub_1", first)
    ledger.mark_dropped("pub_1", later)  # a second gc run (or a retry) keeps the first time
    assert ledger.kept_version("pub_1").dropped_at == first
    assert ledger.kept_version("pub_2").dropped_at is None  # only that one
    with pytest.raises(InvalidInputError, match=r"dropped_at 'yesterday'"):
        ledger.mark_dropped("pub_2", "yesterday")
    assert ledger.kept_version("pub_2").dropped_at is None
    dropped = ledger.kept_version("pub_1")
    assert dropped.model("fct_sales").rows == 12 and dropped.rolled_back_by is None
    assert "dropped at 2026-09-02T10:00:00+00:00" in str(dropped)


def stopped_at(patch: pytest.MonkeyPatch, version: int) -> None:
    """This code as it was at ``version``: migrations stop there, and backfills are recorded
    without the columns later versions added (engine_type: version 8)."""
    patch.setattr(ledger_sql, "SCHEMA_VERSION", version)
    if version < 8:
        insert = ledger_sql._INSERT_BACKFILL
        patch.setattr(
            ledger_sql,
            "_INSERT_BACKFILL",
            insert.replace(", engine_type)", ")").replace(", :engine_type)", ")"),
        )
        sample = ledger_sql._INSERT_SAMPLE
        patch.setattr(
            ledger_sql,
            "_INSERT_SAMPLE",
            sample.replace(", engine_type)", ")").replace(", :engine_type)", ")"),
        )


def test_a_version_6_ledger_migrates_to_7_and_keeps_its_rows(
    backend: Backend, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend.make_v1(url)
    with monkeypatch.context() as patch:  # this code, stopped at version 6
        stopped_at(patch, 6)
        old = open_ledger(url)
        try:
            assert backend.version(url) == 6
            old.create_backfill(record("b2"), tasks(1))
            make_done(old, "b2")
            old.record_publication("b2", publication("pub_old"))
        finally:
            old.close()
    led = open_ledger(url)
    try:
        assert backend.version(url) == SCHEMA_VERSION
        assert status(led, "b1") == "running" and status(led, "b2") == "published"
        (pub,) = led.publications()
        assert (pub.publication_id, pub.models) == ("pub_old", {"m": ["p0"]})
        assert led.kept_versions() == []  # that publication kept nothing the ledger knows of
        with pytest.raises(NotFoundError, match="pub_old kept nothing the ledger knows of"):
            led.kept_version("pub_old")
        mine = published(led, "b3", "pub_new")  # the version 7 records
        led.record_rollback(
            kept("rb_1", "b3", rolls_back="pub_new", at="2026-08-04T00:00:00+00:00")
        )
        assert led.kept_version("pub_new") == dataclasses.replace(mine, rolled_back_by="rb_1")
    finally:
        led.close()
    open_ledger(url).close()  # opening it again migrates nothing
    assert backend.version(url) == SCHEMA_VERSION


# -- replays from Kafka (schema version 3) -------------------------------------------------------
def offset_reset(
    rid: str,
    topic: str = "orders",
    at: str = "2026-02-01T00:00:00+00:00",
    undoes: str | None = None,
) -> dict[str, Any]:
    return {
        "reset_id": rid,
        "group_id": "etl",
        "topic": topic,
        "created_at": at,
        "created_by": "me",
        "target": "2026-01-02T00:00:00+00:00",
        "offsets_old": json.dumps({"0": 10, "1": -1}),
        "offsets_new": json.dumps({"0": 3, "1": 0}),
        "undoes": undoes,
    }


def test_an_attempts_detail_is_kept_with_that_attempt_only(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), tasks(2))
    ledger.create_backfill(record("b2"), tasks(1))
    first, second = ledger.claim("b1", LIVE, 2, 60)
    detail = {"kafka": {"topic": "orders", "ranges": [{"partition": 0, "from": 5, "to": 9}]}}
    ledger.record_attempt_detail("b1", first.attempt_id, json.dumps(detail))
    by_id = {a.id: a for a in ledger.attempts("b1")}
    assert by_id[first.attempt_id].detail == detail
    assert by_id[second.attempt_id].detail is None
    assert finish(ledger, first, "b1", LIVE) == "done"  # finishing keeps it
    ledger.record_attempt_detail("b1", second.attempt_id, "{}")
    ledger.record_attempt_detail("b1", second.attempt_id, '{"again": 1}')  # the last one stays
    by_id = {a.id: a for a in ledger.attempts("b1")}
    assert by_id[first.attempt_id].detail == detail
    assert by_id[second.attempt_id].detail == {"again": 1}
    with pytest.raises(NotFoundError, match="no attempt"):  # another backfill's attempt
        ledger.record_attempt_detail("b2", first.attempt_id, "{}")
    with pytest.raises(NotFoundError, match="no attempt"):
        ledger.record_attempt_detail("b1", 10_000, "{}")
    assert all(a["detail"] is None for a in ledger.attempts("b2"))


def test_offset_resets_roundtrip_per_group_and_topic_oldest_first(ledger: LedgerBackend) -> None:
    assert ledger.offset_resets("etl") == []
    ledger.record_offset_reset(offset_reset("r2", at="2026-02-02T00:00:00+00:00"))
    ledger.record_offset_reset(offset_reset("r1"))
    ledger.record_offset_reset(offset_reset("r3", topic="payments"))
    ledger.record_offset_reset(
        {
            **offset_reset("r4", at="2026-02-03T00:00:00+00:00"),
            "undoes": "r2",
            "offsets_old": json.dumps({"0": 3, "1": 0}),
            "offsets_new": json.dumps({"0": 10}),
        }
    )
    ledger.record_offset_reset({**offset_reset("r9"), "group_id": "other"})
    assert [r["reset_id"] for r in ledger.offset_resets("etl", "orders")] == ["r1", "r2", "r4"]
    assert [r["reset_id"] for r in ledger.offset_resets("etl")] == ["r1", "r3", "r2", "r4"]
    assert [r["reset_id"] for r in ledger.offset_resets("other")] == ["r9"]
    assert ledger.offset_resets("etl", "nope") == [] and ledger.offset_resets("nope") == []
    (r1, _r2, r4) = ledger.offset_resets("etl", "orders")
    assert {k: r1[k] for k in ("group_id", "topic", "created_by", "target", "undoes")} == {
        "group_id": "etl",
        "topic": "orders",
        "created_by": "me",
        "target": "2026-01-02T00:00:00+00:00",
        "undoes": None,
    }
    assert r1.offsets_old == {0: 10, 1: -1}  # decoded: partition -> offset
    assert r1.offsets_new == {0: 3, 1: 0}
    assert r4.undoes == "r2" and r4.offsets_new == {0: 10}
    # The same reset again (a retried command) changes nothing, even with other values.
    ledger.record_offset_reset({**offset_reset("r1"), "offsets_new": json.dumps({"0": 99})})
    assert ledger.offset_resets("etl", "orders")[0].offsets_new == {0: 3, 1: 0}
    bad = offset_reset("r5")
    del bad["offsets_old"]
    with pytest.raises(InvalidInputError, match="lacks offsets_old"):
        ledger.record_offset_reset(bad)
    assert len(ledger.offset_resets("etl")) == 4


# -- costs -------------------------------------------------------------------------------------
def sample(model: str, seconds: float, sql_hash: str | None = "h1") -> dict[str, Any]:
    return {
        "model": model,
        "sql_hash": sql_hash,
        "label": "2026-01-01",
        "partitions": 1,
        "seconds": seconds,
        "rows": 7,
        "created_at": "2026-02-01T00:00:00.000+00:00",
    }


def test_cost_history_reads_done_attempts_of_recent_backfills_then_samples(
    ledger: LedgerBackend,
) -> None:
    for n, bid in enumerate(["b1", "b2", "b3"]):
        rec = {**record(bid), "models": json.dumps({"m": f"hash{n}"})}
        ts = tasks(3)
        ts[2]["partitions"] = 4
        ledger.create_backfill(rec, ts)
        time.sleep(0.002)  # created_at orders the backfills
        claims = ledger.claim(bid, LIVE, 3, 60)
        for c in claims[:2]:  # task 2 is claimed but never finishes: no measurement
            assert (
                ledger.finish(
                    c, bid, LIVE, TaskEnd.success(0.25, 5 * (c.task.task_id + 1), 0, FP_AB)
                )
                == "done"
            )
    ledger.create_backfill({**record("other"), "project": "q"}, tasks(1))
    (c,) = ledger.claim("other", LIVE, 1, 60)
    finish(ledger, c, "other", LIVE)
    ledger.record_cost_samples("p", [sample("m", 1.5), sample("n", 2.0, None)])

    history = ledger.cost_history("p", ["m"], backfills=2)
    runs = [h for h in history if h["source"] == "run"]
    # only the two newest backfills of project p, newest first; only done attempts
    assert [(h["backfill_id"], h["sql_hash"]) for h in runs] == [
        ("b3", "hash2"),
        ("b3", "hash2"),
        ("b2", "hash1"),
        ("b2", "hash1"),
    ]
    assert sorted(h["rows"] for h in runs) == [5, 5, 10, 10]
    assert all(h["seconds"] == 0.25 and h["partitions"] == 1 and h["model"] == "m" for h in runs)
    assert all(h["wall_seconds"] is not None and h["wall_seconds"] >= 0 for h in runs)
    (s,) = [h for h in history if h["source"] == "sample"]
    assert (s["model"], s["seconds"], s["sql_hash"], s["rows"], s["backfill_id"]) == (
        "m",
        1.5,
        "h1",
        7,
        None,
    )
    assert history[-1] is s  # samples come after the runs
    assert [h["sql_hash"] for h in ledger.cost_history("p", ["n"])] == [None]
    assert ledger.cost_history("p", []) == [] and ledger.cost_history("nope", ["m"]) == []
    with pytest.raises(InvalidInputError, match="lacks sql_hash, label"):
        ledger.record_cost_samples("p", [{"model": "m"}])
    with pytest.raises(InvalidInputError, match=r"seconds -1\.0"):
        ledger.record_cost_samples("p", [sample("m", -1.0)])
    assert len(ledger.cost_history("p", ["m"])) == 7  # nothing of the refused calls landed


def test_cost_history_names_the_engine_the_period_and_the_rows_of_each_partition(
    ledger: LedgerBackend,
) -> None:
    days = {"p0": PartitionFingerprint.of(5, 0xAB), "p1": PartitionFingerprint.of(20, 0xCD)}
    by_day = TaskFingerprint(PartitionFingerprint.total(days.values()), days)
    for bid, engine in (("duck", "duckdb"), ("spark", "spark")):
        ledger.create_backfill({**record(bid), "engine_type": engine}, tasks(2))
        time.sleep(0.002)
        for c in ledger.claim(bid, LIVE, 2, 60):
            fp = by_day if c.task.task_id == 0 else FP_AB
            end = TaskEnd.success(0.5, fp.period.rows, 0, fp)
            assert ledger.finish(c, bid, LIVE, end) == "done"
    assert ledger.backfill("duck").engine_type == "duckdb"
    ledger.record_cost_samples("p", [{**sample("m", 1.0), "engine_type": "postgres"}])

    history = ledger.cost_history("p", ["m"])
    assert [(h.source, h.backfill_id, h.engine_type) for h in history] == [
        ("run", "spark", "spark"),
        ("run", "spark", "spark"),
        ("run", "duck", "duckdb"),
        ("run", "duck", "duckdb"),
        ("sample", None, "postgres"),
    ]
    first = next(h for h in history if h.backfill_id == "duck" and h.label == "p0")
    assert first.partition_rows == {"p0": 5, "p1": 20} and first.rows == 25
    assert dt.datetime.fromisoformat(str(first.start)) == dt.datetime(
        2026, 1, 1, tzinfo=dt.timezone.utc
    )
    assert dt.datetime.fromisoformat(str(first.end)) == dt.datetime(
        2026, 1, 2, tzinfo=dt.timezone.utc
    )
    second = next(h for h in history if h.backfill_id == "duck" and h.label == "p1")
    assert second.partition_rows is None and second.rows == 1  # no partitions recorded
    assert history[-1].label == "2026-01-01" and history[-1].start is None


def test_a_version_7_ledger_migrates_to_8_naming_the_engines_it_can(
    backend: Backend, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = {
        "d": "DuckDBEngine('/wh/shop.duckdb', schema='main')",
        "s": "SparkEngine({'type': 'hadoop'}, master='local[2]')",
        "g": "PostgresEngine('postgresql://me:***@db/wh', schema='public')",
        "t": "DbtEngine('/shop', target='dev', warehouse='duckdb')",
        "x": "MyEngine()",  # a plugin: its type cannot be told from its repr
    }
    with monkeypatch.context() as patch:  # this code, stopped at version 7
        stopped_at(patch, 7)
        old = open_ledger(url)
        try:
            assert backend.version(url) == 7
            for bid, engine in engines.items():
                old.create_backfill({**record(bid), "engine": engine}, tasks(1))
            old.record_cost_samples("p", [sample("m", 1.0)])
        finally:
            old.close()
    led = open_ledger(url)
    try:
        assert backend.version(url) == SCHEMA_VERSION == 10
        types = {bid: led.backfill(bid).engine_type for bid in engines}
        assert types == {"d": "duckdb", "s": "spark", "g": "postgres", "t": "dbt", "x": None}
        assert [h.engine_type for h in led.cost_history("p", ["m"])] == [None]
        led.record_cost_samples("p", [{**sample("m", 2.0), "engine_type": "duckdb"}])
        assert {h.engine_type for h in led.cost_history("p", ["m"])} == {None, "duckdb"}
    finally:
        led.close()


# -- storage -----------------------------------------------------------------------------------
def test_a_ledger_of_a_newer_schema_version_is_refused(backend: Backend, url: str) -> None:
    led = open_ledger(url)
    led.create_backfill(record("b1"), tasks(1))
    led.close()
    backend.make_newer(url)
    newer, supported = SCHEMA_VERSION + 1, SCHEMA_VERSION
    with pytest.raises(
        LedgerError,
        match=rf"schema version {newer}, newer than the version "
        rf"{supported} this backfill supports",
    ):
        open_ledger(url)


def test_an_older_ledger_is_migrated_and_keeps_its_rows(backend: Backend, url: str) -> None:
    backend.make_v1(url)
    assert backend.version(url) == 1
    led = open_ledger(url)
    try:
        assert backend.version(url) == SCHEMA_VERSION == 10
        migrated = led.backfill("b1")
        assert migrated["reason"] == "v1" and migrated["status"] == "running"
        assert (migrated.paused_at, migrated.options) == (None, {})
        assert [(t.task_id, t.status, t.attempts, t.depends_on) for t in led.tasks("b1")] == [
            (0, "done", 1, ()),
            (1, "pending", 0, (0,)),
        ]
        assert led.tasks("b1")[0].start == dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        assert [a["worker"] for a in led.attempts("b1")] == ["old:1:w"]
        (claim,) = led.claim("b1", LIVE, 5, 60)  # the migrated tables work for new writes
        assert (claim.task.task_id, claim.attempt) == (1, 1)
        assert finish(led, claim, "b1", LIVE) == "done"
        led.record_attempt_detail("b1", claim.attempt_id, "{}")  # and the version 4 records
        assert [a.detail for a in led.attempts("b1")] == [None, {}]
        led.record_offset_reset(offset_reset("r1"))
        assert [r["reset_id"] for r in led.offset_resets("etl")] == ["r1"]
        led.set_status("b1", "interrupted")  # the version 5 state
        assert status(led, "b1") == "interrupted"
        led.record_cost_samples("p", [sample("m", 0.5)])  # and the version 6 records
        assert [h["source"] for h in led.cost_history("p", ["m"])] == ["run", "run", "sample"]
        led.cancel("b1", "a v3 state in a migrated table", "me")
        assert status(led, "b1") == "cancelled"
        published(led, "b2", "pub_1")  # and the version 7 records
        assert [k.publication_id for k in led.kept_versions("b2")] == ["pub_1"]
        # version 8: b1's recorded engine ("none") is no built-in engine's: not recorded
        assert migrated.engine_type is None
        assert {h.engine_type for h in led.cost_history("p", ["m"])} == {None}
    finally:
        led.close()
    open_ledger(url).close()  # opening it again migrates nothing
    assert backend.version(url) == SCHEMA_VERSION


# -- SQLite only -------------------------------------------------------------------------------
def test_sqlite_errors_leave_as_ledger_errors_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"not a database, but sixteen bytes and more" * 4)
    with pytest.raises(
        LedgerError,
        match=rf"ledger {re.escape(str(path))}: opening failed: "
        "file is not a database",
    ):
        open_ledger(path)
    with pytest.raises(LedgerError, match="is a directory"):
        open_ledger(tmp_path)


def test_only_the_ledger_package_touches_sqlite_and_callers_use_only_the_protocol() -> None:
    package = Path(__import__("backfill").__file__).parent
    protocol = {m for m in vars(LedgerBackend) if not m.startswith("_")}
    for source in package.rglob("*.py"):
        if "ledger" in source.relative_to(package).parts[:-1]:
            continue
        text = source.read_text()
        assert not re.search(r"^\s*(import|from)\s+sqlite3", text, re.M), source
        used = set(re.findall(r"\bledger\.(\w+)\(", text))
        assert used <= protocol, f"{source} calls {used - protocol} outside LedgerBackend"
