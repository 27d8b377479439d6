"""Operating a running backfill: pause, resume and cancel from a second real process (the
``backfill`` CLI in a subprocess) while a runner's tasks are held on a gate the test opens; the
budget stopping a run midway; windows through the runner with a controllable clock (no sleeping:
the fake clock jumps, and tasks advance it by the engine time they report); the CLI's exit codes
for a runner that stops early; the Airflow-facing errors of a held backfill."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import backfill
from backfill.engines import Area, PartitionFingerprint, WriteResult
from backfill.engines.duckdb import DuckDBEngine, audit_schema
from backfill.run.ledger import BackfillCancelledError, BackfillPausedError, SqliteLedger
from fake_engines import WriteOnlyEngine
from shop_support import AS_OF, cli, copy_built, query

UTC = dt.timezone.utc
FP = PartitionFingerprint(1, "00000000000000ab")


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


class FakeClock:
    """The runner's clock, moved by hand: ``sleep`` jumps ahead (and yields a moment of real
    time, so the other process's writes land between polls); tasks ``advance`` it."""

    def __init__(self, start: dt.datetime) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> dt.datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += dt.timedelta(seconds=seconds)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        time.sleep(0.005)


class GatedEngine(WriteOnlyEngine):
    """Each task records (label, clock time) when it starts, then waits for the gate, then takes
    ``seconds`` of engine time (advancing the clock by them) and writes one row."""

    name = "gated"

    def __init__(self, clock: FakeClock, seconds: float = 1.0, open_gate: bool = True) -> None:
        self.clock, self.seconds = clock, seconds
        self.gate = threading.Event()
        if open_gate:
            self.gate.set()
        self.started: list[tuple[str, dt.datetime]] = []
        self._lock = threading.Lock()

    def run_task(self, project: Any, model: str, start: Any, end: Any, area: Area) -> WriteResult:
        with self._lock:
            self.started.append((f"{start:%Y-%m-%d}", self.clock.now()))
        assert self.gate.wait(60), "the test never opened the gate"
        self.clock.advance(self.seconds)
        return WriteResult(1, 0, FP, self.seconds)


class GatedDuckDB(DuckDBEngine):
    """The real DuckDB engine (a real audit area), each task held on a gate first."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()
        self.started = 0
        self._started_lock = threading.Lock()

    def run_task(self, project: Any, model: str, start: Any, end: Any, area: Area) -> Any:
        with self._started_lock:
            self.started += 1
        assert self.gate.wait(60), "the test never opened the gate"
        return super().run_task(project, model, start, end, area)


def make(tmp_path: Path, engine: Any, days: int = 6, **create: Any) -> backfill.Backfill:
    p = backfill.Project("ops")
    p.source("raw.t", grain="day", event_time="t")
    p.model("m", depends_on=["raw.t"], grain="day", event_time="t", sql="select 1")
    end = (dt.date(2026, 3, 1) + dt.timedelta(days=days)).isoformat()
    plan = p.plan("m", "2026-03-01", end, as_of="2026-12-01")
    return backfill.Backfill.create(
        p,
        plan,
        reason="ops test",
        engine=engine,
        ledger=SqliteLedger(tmp_path / "ledger.sqlite"),
        **create,
    )


def ledger_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite'}"


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-runner") as ex:
        yield ex


def until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def done(bf: backfill.Backfill) -> int:
    return sum(t.status == "done" for t in bf.tasks())


# -- pause and resume from another process -------------------------------------------------------
def test_pause_from_another_process_lets_running_tasks_finish_and_the_runner_waits_for_resume(
    tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    clock = FakeClock(at("2026-11-02T12:00"))
    engine = GatedEngine(clock, open_gate=False)
    bf = make(tmp_path, engine)
    runner: Future[backfill.BackfillStatus] = pool.submit(
        bf.run, concurrency=2, clock=clock, poll=0.01, held_poll=7.0
    )
    until(lambda: len(engine.started) == 2, "two tasks running")

    paused = cli("pause", bf.id, "--ledger", ledger_url(tmp_path))
    assert paused.returncode == 0, paused.stderr
    assert f"backfill {bf.id} paused: running tasks finish" in paused.stdout
    engine.gate.set()  # the two running tasks finish; nothing new may start
    until(lambda: 7.0 in clock.sleeps, "the runner waiting on the pause")
    assert done(bf) == 2 and len(engine.started) == 2 and not runner.done()
    st = bf.status()
    assert (st.status, st.held, st.paused) == ("paused", "paused", True)
    assert st.note is not None and "nothing new starts: backfill resume" in st.note

    again = cli("pause", bf.id, "--ledger", ledger_url(tmp_path))
    assert again.returncode == 2 and "paused already" in again.stderr
    resumed = cli("resume", bf.id, "--ledger", ledger_url(tmp_path))
    assert resumed.returncode == 0, resumed.stderr
    final = runner.result(timeout=60)  # it carried on by itself
    assert final.ok and final.done == 6 and final.held is None
    assert sorted(a["task_id"] for a in bf.attempts()) == list(range(6))  # each ran once
    assert cli("resume", bf.id, "--ledger", ledger_url(tmp_path)).returncode == 2  # not paused


def test_a_paused_backfill_with_exit_when_held_returns_at_once(tmp_path: Path) -> None:
    clock = FakeClock(at("2026-11-02T12:00"))
    engine = GatedEngine(clock)
    bf = make(tmp_path, engine)
    bf.ledger.set_paused(bf.id, True, "ops")
    st = bf.run(clock=clock, exit_when_held=True)
    assert (st.held, st.done, engine.started) == ("paused", 0, [])
    bf.ledger.set_paused(bf.id, False, "ops")
    assert bf.run(clock=clock).ok


# -- cancel ----------------------------------------------------------------------------------
@pytest.fixture
def shop_dir(built_shop: Path, tmp_path: Path) -> Path:
    return copy_built(built_shop, tmp_path / "shop")


def test_cancel_during_a_run_stops_it_keeps_the_audit_area_and_publish_refuses(
    shop_dir: Path, pool: ThreadPoolExecutor
) -> None:
    p = backfill.Project.load(shop_dir)
    engine = GatedDuckDB(shop_dir / "warehouse.duckdb")
    bf = p.backfill(
        p.plan("fct_daily_sales", "2026-08-01", "2026-08-07", as_of=AS_OF),
        reason="cancel me",
        engine=engine,
    )
    clock = FakeClock(at("2026-11-02T12:00"))
    runner = pool.submit(bf.run, concurrency=2, clock=clock, poll=0.01)
    until(lambda: engine.started == 2, "two tasks running")

    out = cli("cancel", bf.id, "--project", str(shop_dir), "--reason", "wrong period")
    assert out.returncode == 0, out.stderr
    assert "its audit area stays until: backfill discard" in out.stdout
    engine.gate.set()
    final = runner.result(timeout=60)
    assert (final.status, final.held, final.done, engine.started) == (
        "cancelled",
        "cancelled",
        2,
        2,
    )
    assert final.note is not None and final.note.endswith(": wrong period")
    assert cli("run", "--resume", bf.id, "--project", str(shop_dir)).returncode == 2

    # The audit area is kept: the two partitions written before the cancel are there.
    schema = audit_schema(bf.id)
    assert query(shop_dir, f"SELECT count(*) FROM {schema}.fct_daily_sales") == [(2,)]
    # Publishing it is refused by the publish layer, naming who cancelled it and why.
    with pytest.raises(
        BackfillCancelledError,
        match=r"cancelled by .* \('wrong period'\); a "
        "cancelled backfill is never published",
    ):
        bf.publish("should not happen")
    out = cli("publish", bf.id, "--project", str(shop_dir), "--note", "no")
    assert out.returncode == 1 and "never published" in out.stderr
    assert bf.ledger.publications(bf.id) == []
    # ... until discard drops it.
    assert cli("discard", bf.id, "--project", str(shop_dir)).returncode == 0
    assert query(
        shop_dir, f"SELECT count(*) FROM information_schema.schemata WHERE schema_name = '{schema}'"
    ) == [(0,)]
    assert bf.ledger.backfill(bf.id)["status"] == "discarded"


# -- budget ----------------------------------------------------------------------------------
def test_the_budget_stops_a_run_midway_and_a_raised_budget_resumes_it(tmp_path: Path) -> None:
    clock = FakeClock(at("2026-11-02T12:00"))
    engine = GatedEngine(clock, seconds=100.0)
    # 6 tasks estimated at 100 s each: 600 s, over the 350 s budget, so it needs --force.
    with pytest.raises(backfill.InvalidInputError, match="exceeds the budget of 5m 50s"):
        make(tmp_path, engine, budget="350s", costs={"m": 100.0})
    bf = make(tmp_path, engine, budget="350s", costs={"m": 100.0}, force="test the stop")
    st = bf.run(concurrency=2, clock=clock, poll=0.01)
    # 3 tasks (300 s) fit; a 4th would make 400 s: nothing more starts.
    assert (st.held, st.done, len(engine.started)) == ("budget", 3, 3)
    assert st.budget == {"budget": 350.0, "spent": 300.0, "remaining": 50.0}
    assert st.note is not None and st.note.startswith(
        "stopped within its budget (5m 00s of 5m 50s spent)"
    )
    assert "budget: 5m 00s of 5m 50s engine time spent, 50.0 s remaining" in str(st)
    opts = bf.ledger.backfill(bf.id).options
    bf.ledger.set_options(bf.id, {**opts, "budget_seconds": 600.0})
    assert bf.run(concurrency=2, clock=clock, poll=0.01).ok
    assert len(engine.started) == 6


# -- windows through the runner ----------------------------------------------------------------
def test_the_runner_waits_for_windows_and_claims_only_what_fits_across_the_dst_change(
    tmp_path: Path,
) -> None:
    """3-hour tasks in 22:00-06:00 Berlin nights: the 9-hour night when clocks fall back holds
    three, the next 8-hour night two (the same starts the window unit test derives)."""
    clock = FakeClock(at("2026-10-24T12:00"))
    engine = GatedEngine(clock, seconds=3 * 3600.0)
    bf = make(
        tmp_path, engine, days=5, windows="22:00-06:00 Europe/Berlin", costs={"m": 3 * 3600.0}
    )
    early = bf.run(clock=clock, exit_outside_window=True)
    assert (early.held, early.done, engine.started) == ("window", 0, [])
    assert early.note == "waiting for window, opens 22:00 CEST"
    assert early.status == "running"  # not "interrupted": it waits for its window
    final = bf.run(concurrency=1, clock=clock, poll=0.01, max_wait=86400.0)
    assert final.ok
    assert [when for _, when in engine.started] == [
        at("2026-10-24T20:00"),
        at("2026-10-24T23:00"),
        at("2026-10-25T02:00"),
        at("2026-10-25T21:00"),
        at("2026-10-26T00:00"),
    ]


# -- the CLI's exit codes --------------------------------------------------------------------
def test_cli_exit_codes_outside_a_window_and_when_held(shop_dir: Path) -> None:
    now = dt.datetime.now(UTC)
    window = f"{(now.hour + 2) % 24:02d}:00-{(now.hour + 3) % 24:02d}:00 UTC"  # closed now
    project = ["--project", str(shop_dir)]
    out = cli(
        "run",
        *project,
        "--select",
        "fct_monthly_sales",
        "--start",
        "2026-03-01",
        "--end",
        "2026-05-01",
        "--as-of",
        AS_OF,
        "--reason",
        "at night",
        "--window",
        window,
        "--exit-outside-window",
        "--json",
    )
    assert out.returncode == 3, out.stderr  # stopped for now: try again later
    doc = json.loads(out.stdout)
    bid = doc["id"]
    assert doc["held"] == "window" and doc["tasks"]["done"] == 0
    assert doc["note"] == f"waiting for window, opens {(now.hour + 2) % 24:02d}:00 UTC"
    shown = cli("status", bid, *project)
    assert shown.returncode == 0 and "waiting for window, opens" in shown.stdout

    assert cli("pause", bid, *project).returncode == 0
    out = cli("run", "--resume", bid, *project, "--exit-when-held", "--json")
    assert out.returncode == 3 and json.loads(out.stdout)["status"] == "paused"
    assert json.loads(cli("status", bid, *project, "--json").stdout)["held"] == "paused"
    out = cli("cancel", bid, *project, "--reason", " ")
    assert out.returncode == 2 and "needs a reason" in out.stderr
    assert cli("cancel", bid, *project, "--reason", "not needed").returncode == 0
    out = cli("cancel", bid, *project, "--reason", "again")
    assert out.returncode == 2 and "cancelled already" in out.stderr
    out = cli("pause", bid, *project)
    assert out.returncode == 2 and "is cancelled" in out.stderr
    out = cli("pause", "bf_nope", *project)
    assert out.returncode == 2 and "bf_nope" in out.stderr


# -- what Airflow's tasks see ----------------------------------------------------------------
def test_the_airflow_task_of_a_held_backfill_raises_paused_or_cancelled(shop_dir: Path) -> None:
    from backfill.integrations import airflow as bfa

    bid = bfa.plan_backfill(
        shop_dir, "fct_monthly_sales", "2026-03-01", "2026-05-01", reason="held", as_of=AS_OF
    )
    bfa.run_task(bid, 0, project=shop_dir)
    led = SqliteLedger.for_project(shop_dir / ".backfill")
    led.set_paused(bid, True, "ops")
    with pytest.raises(BackfillPausedError, match="resume it with: backfill resume"):
        bfa.run_task(bid, 1, project=shop_dir)
    assert bfa.run_task(bid, 0, project=shop_dir)["skipped"]  # done: nothing to wait for
    led.set_paused(bid, False, "ops")
    assert bfa.run_task(bid, 1, project=shop_dir)["status"] == "done"  # the rescheduled try
    led.cancel(bid, "wrong months", "ops")
    with pytest.raises(BackfillCancelledError, match="is cancelled; nothing more of it runs"):
        bfa.run_task(bid, 1, project=shop_dir)
    with pytest.raises(BackfillCancelledError, match="'wrong months'"):
        bfa.audit(bid, project=shop_dir)
    with pytest.raises(BackfillCancelledError, match="never published"):
        bfa.publish(bid, "no", project=shop_dir)
