"""The runner, the DuckDB engine and the ledger, on the shop example (built small for speed)."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import pytest

import backfill
from backfill.engines import Area, TaskFailure, open_engine
from backfill.engines.duckdb import DuckDBEngine, audit_schema
from backfill.examples import shop
from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
from backfill.run.ledger import SqliteLedger, TaskEnd
from shop_support import AS_OF, cli, copy_built, query

UTC = dt.timezone.utc


def day(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def shop_dir(built_shop: Path, tmp_path: Path) -> Path:
    dest = copy_built(built_shop, tmp_path / "shop")
    return dest


@pytest.fixture
def con(shop_dir: Path) -> Iterator[Any]:
    yield lambda sql: query(shop_dir, sql)


def fingerprints(root: Path, schema: str) -> dict[str, backfill.Fingerprint]:
    """The C++ fingerprint of every table in ``schema`` (an oracle outside the engine)."""
    c = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        names = [
            r[0]
            for r in c.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [schema]
            ).fetchall()
        ]
        return {
            n: backfill.fingerprint(c.sql(f'SELECT * FROM "{schema}"."{n}"')) for n in sorted(names)
        }
    finally:
        c.close()


# -- the shop build --------------------------------------------------------------------------------
def test_build_fills_every_model_for_every_period(built_shop: Path) -> None:
    c = duckdb.connect(str(built_shop / "warehouse.duckdb"), read_only=True)
    try:
        days = c.execute(
            "SELECT count(*), count(DISTINCT sales_date), min(sales_date), "
            "max(sales_date) FROM main.fct_daily_sales"
        ).fetchone()
        assert days == (334, 334, dt.date(2026, 1, 1), dt.date(2026, 11, 30))
        assert c.execute("SELECT count(*) FROM main.fct_monthly_sales").fetchone() == (11,)
        # clean_orders holds every raw order except test orders, each once.
        assert (
            c.execute("SELECT count(*) FROM raw.orders WHERE status <> 'TEST'").fetchone()
            == c.execute("SELECT count(DISTINCT order_id) FROM main.clean_orders").fetchone()
        )
        # the monthly rollup agrees with the daily table
        assert c.execute(
            "SELECT count(*) FROM main.fct_monthly_sales m JOIN (SELECT date_trunc('month', "
            "sales_date) AS mo, sum(revenue) AS r FROM main.fct_daily_sales GROUP BY 1) d "
            "ON d.mo = m.sales_month WHERE d.r <> m.revenue"
        ).fetchone() == (0,)
    finally:
        c.close()


def test_generator_is_deterministic(tmp_path: Path) -> None:
    a = shop.generate(tmp_path / "a.duckdb", orders_per_day=5)
    b = shop.generate(tmp_path / "b.duckdb", orders_per_day=5)
    assert a == b and a["orders"] > 5 * 334
    prints = []
    for name in ("a", "b"):
        c = duckdb.connect(str(tmp_path / f"{name}.duckdb"), read_only=True)
        prints.append(
            {
                t: backfill.fingerprint(c.sql(f"SELECT * FROM raw.{t}"))
                for t in ("orders", "order_items")
            }
        )
        c.close()
    assert prints[0] == prints[1]


# -- idempotency ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["direct", "audit"])
def test_running_any_task_twice_leaves_identical_tables(shop_dir: Path, mode: str) -> None:
    p = backfill.Project.load(shop_dir)
    assert p.settings is not None
    engine = open_engine(p.settings.engine)
    rng = random.Random(7)
    area = Area(None if mode == "direct" else "bf_test", {})
    before = fingerprints(shop_dir, "main")
    for model in p.topological_order():
        m = p.models[model]
        if m.grain == "month":
            start, end = day("2026-08-01"), day("2026-09-01")
        else:
            start = day("2026-01-07") + dt.timedelta(days=rng.randrange(300))
            end = start + dt.timedelta(days=1)
        relation = engine.relation(model, area)
        first = engine.run_task(p, model, start, end, area)
        engine.close()  # the oracle below opens the file read-only
        once = fingerprints(shop_dir, relation.split(".")[0].strip('"'))[model]
        second = engine.run_task(p, model, start, end, area)
        engine.close()
        twice = fingerprints(shop_dir, relation.split(".")[0].strip('"'))[model]
        assert once == twice, (model, start)
        assert first.fingerprint == second.fingerprint
        assert second.rows_deleted == first.rows_written > 0
        if mode == "direct":  # re-running a built partition changes nothing at all
            assert once == before[model]


def test_merge_and_full_strategies_are_idempotent(shop_dir: Path) -> None:
    (shop_dir / "models" / "order_status.sql").write_text(
        "{{ config(strategy='merge', unique_key='order_id', event_time='ordered_at') }}\n"
        "select order_id, status, ordered_at from {{ ref('clean_orders') }}\n"
        "where ordered_at >= {{ start }} and ordered_at < {{ end }}\n"
    )
    (shop_dir / "models" / "countries.sql").write_text(
        "{{ config(grain=none, strategy='full') }}\n"
        "select country, count(*) as orders from {{ ref('clean_orders') }} group by 1\n"
    )
    p = backfill.Project.load(shop_dir)
    plan = p.plan("order_status countries", "2026-03-01", "2026-03-04", as_of=AS_OF)
    assert p.backfill(plan, reason="new models", direct=True).run().ok
    first = fingerprints(shop_dir, "main")
    assert p.backfill(plan, reason="again", direct=True).run().ok
    assert fingerprints(shop_dir, "main") == first
    assert first["order_status"].rows > 0 and first["countries"].rows >= 5


# -- the audit area ------------------------------------------------------------------------------
def test_backfill_writes_the_audit_area_and_refs_read_new_then_published(
    shop_dir: Path, con: Any
) -> None:
    published = fingerprints(shop_dir, "main")
    shop.fix(shop_dir)
    p = backfill.Project.load(shop_dir)
    plan = p.plan("fct_daily_sales+", "2026-08-01", "2026-08-15", as_of=AS_OF, partitions_per_run=1)
    bf = p.backfill(plan, reason="discount bug fixed")
    status = bf.run(concurrency=4)
    assert status.ok and status.done == status.total == 14 + 20 + 1
    assert fingerprints(shop_dir, "main") == published  # readers of main see nothing
    a = audit_schema(bf.id)
    dates = con(f"SELECT min(sales_date), max(sales_date), count(*) FROM {a}.fct_daily_sales")
    assert dates == [(dt.date(2026, 8, 1), dt.date(2026, 8, 14), 14)]
    assert con(f"SELECT min(sales_date), max(sales_date), count(*) FROM {a}.fct_sales_7d") == [
        (dt.date(2026, 8, 1), dt.date(2026, 8, 20), 20)
    ]
    ratio = con(
        f"SELECT sum(n.revenue) / sum(o.revenue) FROM {a}.fct_daily_sales n "
        "JOIN main.fct_daily_sales o USING (sales_date)"
    )[0][0]
    assert 0.95 < ratio < 0.995  # the fix lowers revenue by about 2%
    # Oracle: each rolling day = audit days inside the backfill + published days outside it.
    expected = con(f"""
        WITH merged AS (SELECT sales_date, revenue FROM {a}.fct_daily_sales UNION ALL
                        SELECT sales_date, revenue FROM main.fct_daily_sales
                        WHERE sales_date NOT BETWEEN DATE '2026-08-01' AND DATE '2026-08-14')
        SELECT d.sales_date, sum(w.revenue) FROM {a}.fct_sales_7d d JOIN merged w
          ON w.sales_date BETWEEN d.sales_date - 6 AND d.sales_date GROUP BY 1 ORDER BY 1""")
    got = con(f"SELECT sales_date, revenue_7d FROM {a}.fct_sales_7d ORDER BY 1")
    assert got == expected
    month = con(f"SELECT revenue FROM {a}.fct_monthly_sales")[0][0]
    assert (
        month
        == con(f"""SELECT sum(revenue) FROM (SELECT revenue FROM {a}.fct_daily_sales
        UNION ALL SELECT revenue FROM main.fct_daily_sales
        WHERE sales_date BETWEEN DATE '2026-08-15' AND DATE '2026-08-31')""")[0][0]
    )
    # in-engine per-partition fingerprints: Aug 1 differs, Jul 31 (outside) is absent in audit
    parts = [
        (lab, day(lab), day(lab) + dt.timedelta(days=1))
        for lab in ("2026-07-31", "2026-08-01", "2026-08-02")
    ]
    engine = bf.engine
    new = list(engine.fingerprints(p, "fct_daily_sales", bf.area, parts).values())
    old = list(engine.fingerprints(p, "fct_daily_sales", Area(None), parts).values())
    assert [f.rows for f in new] == [0, 1, 1] and [f.rows for f in old] == [1, 1, 1]
    assert new[1].digest != old[1].digest
    same = list(engine.fingerprints(p, "fct_daily_sales", Area(None), parts).values())
    assert same == old
    # only the differing partition travels, as Arrow, into the C++ diff
    aug1 = [(parts[1][1], parts[1][2])]
    with (
        engine.stream(p, "fct_daily_sales", Area(None), aug1) as old_rows,
        engine.stream(p, "fct_daily_sales", bf.area, aug1) as new_rows,
    ):
        result = backfill.diff(old_rows, new_rows, key="sales_date")
    assert (result.summary.rows_old, result.summary.changed) == (1, 1)
    with engine.stream(p, "fct_daily_sales", bf.area, None) as rows:
        assert backfill.ArrowTable.from_arrow(rows).num_rows == 14


def test_rows_outside_the_period_fail_the_task(shop_dir: Path) -> None:
    (shop_dir / "models" / "fct_daily_sales.sql").write_text(
        "{{ config(event_time='sales_date') }}\n"
        "select cast(ordered_at as date) as sales_date, count(*) as orders, 0 as units, "
        "cast(0 as decimal(18,2)) as revenue from {{ ref('clean_orders') }} group by 1\n"
    )
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("fct_daily_sales", "2026-08-01", "2026-08-02", as_of=AS_OF), reason="unbounded read"
    )
    status = bf.run()
    assert not status.ok
    (failed,) = status.failed_tasks
    assert "outside the task's period" in str(failed.error)
    assert "fct_daily_sales.sql" in str(failed.error) and failed.attempts == 1


# -- failures, retries, resume -------------------------------------------------------------------
class FlakyEngine(DuckDBEngine):
    """Fails chosen (model, day) tasks: ``times`` times each, transiently or for good."""

    def __init__(self, path: Path, fail: dict[tuple[str, str], int], transient: bool) -> None:
        super().__init__(path)
        self.fail = dict(fail)
        self.transient = transient
        self.lock = threading.Lock()

    def run_task(self, project: Any, model: str, start: Any, end: Any, area: Area) -> Any:
        key = (model, f"{start:%Y-%m-%d}")
        with self.lock:
            if self.fail.get(key, 0) > 0:
                self.fail[key] -= 1
                raise TaskFailure(f"injected failure of {key}", transient=self.transient)
        return super().run_task(project, model, start, end, area)


def test_transient_failure_is_retried_with_backoff(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    engine = FlakyEngine(
        shop_dir / "warehouse.duckdb", {("fct_daily_sales", "2026-08-03"): 2}, transient=True
    )
    bf = p.backfill(
        p.plan("fct_daily_sales+", "2026-08-01", "2026-08-06", as_of=AS_OF),
        reason="flaky",
        engine=engine,
    )
    status = bf.run(concurrency=3, backoff=0.1, max_attempts=3)
    assert status.ok, str(status)
    mine = [
        a
        for a in bf.attempts()
        if a["task_id"]
        == next(
            t.task_id
            for t in bf.tasks()
            if t.model == "fct_daily_sales" and t.label == "2026-08-03"
        )
    ]
    assert [a["status"] for a in mine] == ["failed", "failed", "done"]
    assert [a["attempt"] for a in mine] == [1, 2, 3]
    gaps = [
        dt.datetime.fromisoformat(b["started_at"]) - dt.datetime.fromisoformat(a["finished_at"])
        for a, b in pairwise(mine)
    ]
    assert gaps[0] >= dt.timedelta(seconds=0.1) and gaps[1] >= dt.timedelta(seconds=0.2)
    assert "injected failure" in str(mine[0]["error"])


def test_failure_blocks_only_downstream_then_resume_finishes(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    engine = FlakyEngine(
        shop_dir / "warehouse.duckdb", {("fct_daily_sales", "2026-08-10"): 5}, transient=False
    )
    bf = p.backfill(
        p.plan("fct_daily_sales+", "2026-08-01", "2026-08-16", as_of=AS_OF, partitions_per_run=1),
        reason="one bad day",
        engine=engine,
    )
    status = bf.run(concurrency=4)
    assert status.status == "failed" and not status.ok
    by_model = {m.model: m for m in status.models}
    assert [(t.model, t.label, t.attempts) for t in status.failed_tasks] == [
        ("fct_daily_sales", "2026-08-10", 1)
    ]  # not transient: no retry
    assert by_model["fct_daily_sales"].done == 14
    assert by_model["fct_monthly_sales"].blocked == 1
    assert by_model["fct_sales_7d"].blocked == 7  # 10..16 Aug read 10 Aug
    assert by_model["fct_sales_7d"].done == 21 - 7
    # The CLI reports it: exit 1, failed task listed.
    out = cli("status", bf.id, "--project", str(shop_dir), "--json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["failed_tasks"][0]["label"] == "2026-08-10" and doc["status"] == "failed"
    # Resume (the failure was, say, a bad node): only what is not done runs.
    done_before = {t.task_id for t in bf.tasks() if t.status == "done"}
    resumed = backfill.Backfill.resume(bf.id, project=shop_dir)
    assert resumed.run(concurrency=4).ok
    reran = {a["task_id"] for a in resumed.attempts() if a["status"] == "done"} & done_before
    assert all(
        sum(1 for a in resumed.attempts() if a["task_id"] == t and a["status"] == "done") == 1
        for t in reran
    )


def test_sql_error_fails_with_file_and_model_and_cli_exits_1(shop_dir: Path) -> None:
    (shop_dir / "models" / "fct_monthly_sales.sql").write_text(
        "{{ config(grain='month', event_time='sales_month') }}\n"
        "select date_trunc('month', sales_date) as sales_month, sum(revenu) as revenue\n"
        "from {{ ref('fct_daily_sales') }} where sales_date >= {{ start }} and "
        "sales_date < {{ end }} group by 1\n"
    )
    out = cli(
        "run",
        "--project",
        str(shop_dir),
        "--select",
        "fct_daily_sales+",
        "--start",
        "2026-08-01",
        "--end",
        "2026-08-04",
        "--reason",
        "typo",
        "--json",
        "--backoff",
        "0",
        "--partitions-per-run",
        "1",
    )
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout[out.stdout.index("{") :])
    (failed,) = doc["failed_tasks"]
    assert failed["model"] == "fct_monthly_sales" and failed["attempts"] == 1
    assert "fct_monthly_sales.sql" in failed["error"] and "revenu" in failed["error"]
    assert {m["model"]: m["done"] for m in doc["models"]} == {
        "fct_daily_sales": 3,
        "fct_monthly_sales": 0,
        "fct_sales_7d": 9,
    }


# -- crashes and several workers -----------------------------------------------------------------
# The crash tests run one plan again beside its reference run, on purpose.
SAME_PLAN = "the same plan again, compared with the reference run"


def _reference(shop_dir: Path, plan: backfill.Plan, p: backfill.Project) -> dict[str, Any]:
    bf = p.backfill(plan, reason="reference")
    assert bf.run(concurrency=3).ok
    return fingerprints(shop_dir, audit_schema(bf.id))


def test_sigkill_at_random_points_then_resume_gives_every_partition_once(shop_dir: Path) -> None:
    shop.fix(shop_dir)
    p = backfill.Project.load(shop_dir)
    plan = p.plan("fct_daily_sales+", "2026-08-01", "2026-08-15", as_of=AS_OF)
    expected = _reference(shop_dir, plan, p)
    assert expected["fct_daily_sales"].rows == 14 and expected["fct_sales_7d"].rows == 20
    rng = random.Random(20261202)
    kills = []
    for trial in range(10):
        bf = p.backfill(plan, reason=f"kill trial {trial}", allow_overlap=SAME_PLAN)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "backfill.cli",
                "run",
                "--resume",
                bf.id,
                "--project",
                str(shop_dir),
                "--json",
                "--concurrency",
                "2",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Kill at a random point of the run: after a random number of tasks, plus a random
        # few milliseconds (often inside a task's transaction or a ledger write).
        target = rng.randrange(1, plan.task_count)
        while proc.poll() is None and bf.status().done < target:
            time.sleep(0.003)
        time.sleep(rng.uniform(0.0, 0.03))
        proc.kill()
        proc.wait()
        after_kill = bf.status()
        kills.append(after_kill.done)
        if after_kill.done < plan.task_count:
            assert after_kill.status == "interrupted" and "--resume" in str(after_kill)
        status = backfill.Backfill.resume(bf.id, project=shop_dir).run(concurrency=3)
        assert status.ok, str(status)
        assert fingerprints(shop_dir, audit_schema(bf.id)) == expected, trial
        c = duckdb.connect(str(shop_dir / "warehouse.duckdb"), read_only=True)
        dupes = c.execute(
            f"SELECT count(*) - count(DISTINCT sales_date) FROM "
            f"{audit_schema(bf.id)}.fct_daily_sales"
        ).fetchone()
        c.close()
        assert dupes == (0,)
        # every task done exactly once in the ledger; killed attempts are marked abandoned
        done = [a["task_id"] for a in bf.attempts() if a["status"] == "done"]
        assert sorted(set(done)) == list(range(plan.task_count))
    assert sum(0 < k < plan.task_count for k in kills) >= 8, kills


def test_two_runner_processes_share_a_backfill_without_running_a_task_twice(shop_dir: Path) -> None:
    shop.fix(shop_dir)
    p = backfill.Project.load(shop_dir)
    # One day a task and one task at a time per runner: the first wave alone (21 days of
    # fct_daily_sales) outlasts the other runner's start, so both must find work. With the
    # default batching (9 tasks, a chain of waves) one runner could rightly take them all.
    plan = p.plan("fct_daily_sales+", "2026-08-01", "2026-08-22", as_of=AS_OF, partitions_per_run=1)
    expected = _reference(shop_dir, plan, p)
    bf = p.backfill(plan, reason="two workers", allow_overlap=SAME_PLAN)
    # A lone process can finish every task before the second one has imported backfill, so the
    # test holds the ledger's write lock until both have the ledger open (they then wait on the
    # lock, busy_timeout 60 s) and releases it: both start claiming together.
    ledger_path = SqliteLedger.for_project_path(p.settings.state_dir).resolve()
    lock = sqlite3.connect(ledger_path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "backfill.cli",
                "run",
                "--resume",
                bf.id,
                "--project",
                str(shop_dir),
                "--json",
                "--concurrency",
                "1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 60
        while not all(_has_open(proc.pid, ledger_path) for proc in procs):
            assert time.monotonic() < deadline, "the runners never opened the ledger"
            assert all(proc.poll() is None for proc in procs), [
                proc.communicate() for proc in procs
            ]
            time.sleep(0.05)
        # Then until both wait on the lock (SQLite's busy handler sleeps): a process that opened
        # the ledger may still load the project, and a loaded machine can take longer than any
        # fixed pause for that.
        while not all(_waiting(proc.pid) for proc in procs):
            assert time.monotonic() < deadline, "the runners never waited on the ledger lock"
            assert all(proc.poll() is None for proc in procs), [
                proc.communicate() for proc in procs
            ]
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    attempts = bf.attempts()
    assert sorted(a["task_id"] for a in attempts) == list(range(plan.task_count))
    assert {a["status"] for a in attempts} == {"done"}
    assert len({a["worker"].rsplit(":", 1)[0] for a in attempts}) == 2  # both processes worked
    assert bf.status().status == "done"
    assert fingerprints(shop_dir, audit_schema(bf.id)) == expected


def _cpu_ticks(pid: int) -> int:
    """The CPU time process ``pid`` has used, in clock ticks (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return -1
    return int(fields[11]) + int(fields[12])  # utime, stime


def _waiting(pid: int, window: float = 0.5) -> bool:
    """Whether process ``pid`` used (almost) no CPU over ``window`` seconds: it waits."""
    before = _cpu_ticks(pid)
    time.sleep(window)
    return 0 <= _cpu_ticks(pid) - before <= 1


def _has_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (Linux /proc)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(Path(os.readlink(fd)) == path for fd in fds.iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False


# -- the ledger -----------------------------------------------------------------------------------
def _tasks(n: int, deps: dict[int, list[int]] | None = None) -> list[dict[str, Any]]:
    return [
        {
            "task_id": i,
            "model": "m",
            "start": day("2026-01-01") + dt.timedelta(days=i),
            "end": day("2026-01-02") + dt.timedelta(days=i),
            "label": str(i),
            "partitions": 1,
            "wave": 0 if not (deps or {}).get(i) else 1,
            "depends_on": (deps or {}).get(i, []),
        }
        for i in range(n)
    ]


def _record(bid: str) -> dict[str, Any]:
    return {
        "id": bid,
        "project": "p",
        "project_root": None,
        "selection": "m",
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


def test_concurrent_claims_never_hand_out_a_task_twice(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite")
    ledger.create_backfill(_record("b1"), _tasks(200))
    got: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        own = SqliteLedger(tmp_path / "ledger.sqlite")
        while claims := own.claim("b1", name, 3, 60):
            with lock:
                got.extend(c.task.task_id for c in claims)

    threads = [threading.Thread(target=worker, args=(f"otherhost:1:{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(200))


def test_claims_respect_dependencies_and_expired_leases(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite")
    ledger.create_backfill(_record("b1"), _tasks(3, {2: [0, 1]}))
    first = ledger.claim("b1", "otherhost:1:a", 10, lease_seconds=0.2)
    assert sorted(c.task.task_id for c in first) == [0, 1]  # 2 waits for both
    assert ledger.claim("b1", "otherhost:2:b", 10, 60) == []
    time.sleep(0.3)  # worker a (on another host: only expiry tells) is gone
    again = ledger.claim("b1", "otherhost:2:b", 10, 60)
    assert sorted(c.task.task_id for c in again) == [0, 1]
    assert all(c.attempt == 2 for c in again)
    for c in again:
        assert (
            ledger.finish(
                c,
                "b1",
                "otherhost:2:b",
                TaskEnd.success(0.0, 1, 0, TaskFingerprint(PartitionFingerprint.of(1, 0))),
            )
            == "done"
        )
    # the late worker's finish does not own the task any more: its attempt stays abandoned
    assert (
        ledger.finish(
            first[0],
            "b1",
            "otherhost:1:a",
            TaskEnd.success(0.0, 1, 0, TaskFingerprint(PartitionFingerprint.of(1, 0))),
        )
        == "lost"
    )
    assert [c.task.task_id for c in ledger.claim("b1", "otherhost:2:b", 10, 60)] == [2]
    statuses = [a["status"] for a in ledger.attempts("b1")]
    assert statuses.count("abandoned") == 2 and statuses.count("done") == 2


def test_status_cli_and_python_agree(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("fct_monthly_sales", "2026-03-01", "2026-05-01", as_of=AS_OF),
        reason="recompute spring",
    )
    out = cli("status", "--project", str(shop_dir))
    assert out.returncode == 0 and "0/2 tasks done" in out.stdout and bf.id in out.stdout
    assert bf.run().ok
    doc = json.loads(cli("status", bf.id, "--project", str(shop_dir), "--json").stdout)
    assert doc["status"] == "done" and doc["tasks"] == {"total": 2, "done": 2}
    st = bf.status()
    assert st.to_pandas().to_dict("records") == [
        {
            "model": "fct_monthly_sales",
            "tasks": 2,
            "done": 2,
            "running": 0,
            "failed": 0,
            "pending": 0,
            "blocked": 0,
        }
    ]
    assert "fct_monthly_sales" in (st._repr_html_() or "")
    assert cli("status", "bf_nope", "--project", str(shop_dir)).returncode == 2
    listed = json.loads(cli("status", "--list", "--json", "--project", str(shop_dir)).stdout)
    assert [(r["id"], r["status"], r["reason"]) for r in listed] == [
        (bf.id, "done", "recompute spring")
    ]


def test_backfill_needs_a_reason(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    with pytest.raises(backfill.InvalidInputError, match="reason"):
        p.backfill(p.plan("fct_monthly_sales", "2026-03-01", "2026-04-01", as_of=AS_OF), reason=" ")
    assert not (shop_dir / ".backfill").exists()


# -- the shop example from the CLI, full size ----------------------------------------------------
def test_shop_built_and_fixed_model_backfilled_from_the_cli(tmp_path: Path) -> None:
    began = time.monotonic()
    root = shop.create(tmp_path / "shop")
    env = {"BACKFILL_PROGRESS": "1", "COLUMNS": "120"}
    built = cli(
        "run",
        "--project",
        str(root),
        "--direct",
        "--select",
        "*",
        "--start",
        "2026-01-01",
        "--end",
        "2026-12-01",
        "--partitions-per-run",
        "31",
        "--reason",
        "initial build",
        env=env,
    )
    assert built.returncode == 0, built.stderr
    shop.fix(root)
    run = cli(
        "run",
        "--project",
        str(root),
        "--select",
        "fct_daily_sales+",
        "--start",
        "2026-08-01",
        "--end",
        "2026-10-29",
        "--reason",
        "discount bug fixed",
        "--concurrency",
        "4",
        env=env,
    )
    elapsed = time.monotonic() - began
    assert run.returncode == 0, run.stderr
    # auto batching (the default) from the initial build's measured costs: a few tasks per
    # model instead of 187 one-day tasks
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run.stdout)
    done = re.findall(r"all tasks\s.*?(\d+)/(\d+)", plain)
    assert done and done[-1][0] == done[-1][1] and int(done[-1][0]) < 187, plain
    assert "━" in run.stdout
    assert "audit area of bf_" in run.stdout
    # A guard against a pathological slowdown only (it takes ~15 s alone): the suite runs on both
    # cores beside Spark and a broker, so wall time here says little; benchmarks/ measure speed.
    assert elapsed < 300, f"build + backfill took {elapsed:.1f} s"
    bid = run.stdout.split("backfill ", 1)[1].split(":", 1)[0]
    c = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        old, new = c.execute(
            f"SELECT sum(o.revenue), sum(n.revenue) FROM {audit_schema(bid)}.fct_daily_sales n "
            "JOIN main.fct_daily_sales o USING (sales_date)"
        ).fetchone()  # type: ignore[misc]
        assert 0.97 < new / old < 0.99
        assert c.execute("SELECT count(*) FROM raw.orders").fetchone()[0] > 80_000  # type: ignore[index]
    finally:
        c.close()


def test_concurrent_runs_of_one_new_period_write_it_once(shop_dir: Path) -> None:
    """Threads replacing the same period that no row of the table holds yet (the table exists):
    each DELETE finds nothing, so DuckDB sees no conflict, and before the engine made them take
    turns every one of them inserted (78 rows for a 13-row day). Now they take turns: the
    period holds its rows once, and the day before it is untouched."""
    p = backfill.Project.load(shop_dir)
    assert p.settings is not None
    engine = DuckDBEngine(p.settings.engine.path, keep_open=True)
    area = Area("bf_turns", {})
    before = engine.run_task(p, "clean_orders", day("2026-05-04"), day("2026-05-05"), area)
    barrier = threading.Barrier(6)
    results = []

    def write() -> None:
        barrier.wait()
        results.append(
            engine.run_task(p, "clean_orders", day("2026-05-05"), day("2026-05-06"), area)
        )

    threads = [threading.Thread(target=write) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.close()
    assert len(results) == 6 and len({r.fingerprint for r in results}) == 1
    assert results[0].rows_written > 0
    got = fingerprints(shop_dir, "audit_bf_turns")["clean_orders"]
    assert got.rows == before.rows_written + results[0].rows_written


def test_concurrent_writes_of_one_partition_conflict_and_are_retried(shop_dir: Path) -> None:
    """Threads replacing the same partition at once: DuckDB raises write-write conflicts, the
    engine retries them, and the partition ends up written exactly once."""
    p = backfill.Project.load(shop_dir)
    assert p.settings is not None
    engine = DuckDBEngine(p.settings.engine.path, keep_open=True)
    area = Area("bf_conflicts", {})
    start, end = day("2026-05-05"), day("2026-05-06")
    barrier = threading.Barrier(6)
    results = []

    def write() -> None:
        barrier.wait()
        results.append(engine.run_task(p, "clean_orders", start, end, area))

    threads = [threading.Thread(target=write) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.close()
    assert len(results) == 6 and len({r.fingerprint for r in results}) == 1
    assert sum(r.conflicts_retried for r in results) >= 1
    got = fingerprints(shop_dir, "audit_bf_conflicts")["clean_orders"]
    assert got.rows == results[0].rows_written == results[0].fingerprint.rows
    assert got == backfill.fingerprint(
        duckdb.connect(str(shop_dir / "warehouse.duckdb"), read_only=True).sql(
            "SELECT * FROM main.clean_orders WHERE ordered_at >= DATE '2026-05-05' "
            "AND ordered_at < DATE '2026-05-06'"
        )
    )


def test_run_refuses_models_the_lint_finds_unreproducible(shop_dir: Path) -> None:
    (shop_dir / "models" / "fct_monthly_sales.sql").write_text(
        "{{ config(grain='month', event_time='sales_month') }}\n"
        "select cast(date_trunc('month', sales_date) as date) as sales_month, "
        "sum(revenue) as revenue, current_date as loaded_on\n"
        "from {{ ref('fct_daily_sales') }} where sales_date >= {{ start }} and "
        "sales_date < {{ end }} group by 1\n"
    )
    args = [
        "run",
        "--project",
        str(shop_dir),
        "--select",
        "fct_monthly_sales",
        "--start",
        "2026-03-01",
        "--end",
        "2026-04-01",
        "--reason",
        "clock",
    ]
    out = cli(*args)
    assert out.returncode == 2
    assert "CLOCK_READ" in out.stderr and "fct_monthly_sales.sql" in out.stderr
    assert not (shop_dir / ".backfill").exists()
    out = cli(*args, "--no-lint")
    assert out.returncode == 0
    assert "  1/1 tasks done" in out.stdout  # without a terminal: plain progress lines


def test_view_and_append_strategies(shop_dir: Path) -> None:
    (shop_dir / "models" / "big_orders.sql").write_text(
        "{{ config(grain=none, strategy='view') }}\n"
        "select * from {{ ref('clean_orders') }} where customer_id < 100\n"
    )
    (shop_dir / "models" / "order_log.sql").write_text(
        "{{ config(strategy='append', event_time='ordered_at') }}\n"
        "select order_id, ordered_at from {{ ref('clean_orders') }}\n"
        "where ordered_at >= {{ start }} and ordered_at < {{ end }}\n"
    )
    p = backfill.Project.load(shop_dir)
    assert (
        p.backfill(
            p.plan("big_orders", "2026-03-01", "2026-03-02", as_of=AS_OF),
            reason="a view",
            direct=True,
        )
        .run()
        .ok
    )
    plan = p.plan("order_log", "2026-03-01", "2026-03-02", as_of=AS_OF, allow_append=True)
    for _ in range(2):
        assert p.backfill(plan, reason="append", direct=True).run().ok
    c = duckdb.connect(str(shop_dir / "warehouse.duckdb"), read_only=True)
    try:
        kinds = dict(
            c.execute(
                "SELECT table_name, table_type FROM information_schema.tables "
                "WHERE table_name IN ('big_orders', 'order_log')"
            ).fetchall()
        )
        assert kinds == {"big_orders": "VIEW", "order_log": "BASE TABLE"}
        once = c.execute(
            "SELECT count(*) FROM main.clean_orders WHERE ordered_at >= "
            "DATE '2026-03-01' AND ordered_at < DATE '2026-03-02'"
        ).fetchone()[0]  # type: ignore[index]
        # append is not idempotent: two runs, two copies (why the planner refuses it by default)
        assert c.execute("SELECT count(*) FROM main.order_log").fetchone() == (2 * once,)
    finally:
        c.close()


def test_a_berlin_day_task_writes_exactly_that_local_day(shop_dir: Path) -> None:
    """2026-10-25 in Europe/Berlin is 25 hours (DST ends); zoneinfo is the oracle."""
    from zoneinfo import ZoneInfo

    yml = shop_dir / "backfill.yml"
    yml.write_text(
        yml.read_text().replace(
            "clean_orders: {tags: [clean, daily]}",
            "clean_orders: {tags: [clean, daily], tz: Europe/Berlin}",
        )
    )
    p = backfill.Project.load(shop_dir)
    before = fingerprints(shop_dir, "main")["clean_orders"]
    bf = p.backfill(
        p.plan("clean_orders", "2026-10-25", "2026-10-26", as_of=AS_OF, tz="Europe/Berlin"),
        reason="berlin day",
        direct=True,
    )
    assert bf.run().ok
    (task,) = bf.tasks()
    berlin = ZoneInfo("Europe/Berlin")
    start = dt.datetime(2026, 10, 25, tzinfo=berlin).astimezone(UTC)
    end = dt.datetime(2026, 10, 26, tzinfo=berlin).astimezone(UTC)
    assert (task.start, task.end, task.label) == (start, end, "2026-10-25")
    assert end - start == dt.timedelta(hours=25)
    c = duckdb.connect(str(shop_dir / "warehouse.duckdb"), read_only=True)
    try:
        expected = c.execute(
            "SELECT count(*) FROM raw.orders WHERE lower(status) <> 'test' AND ordered_at >= ? "
            "AND ordered_at < ?",
            [start.replace(tzinfo=None), end.replace(tzinfo=None)],
        ).fetchone()
    finally:
        c.close()
    assert (task.rows_written,) == expected
    # the same rows were there (built by UTC days): replacing the local day changes nothing
    assert fingerprints(shop_dir, "main")["clean_orders"] == before


def test_this_reads_new_rows_for_the_backfilled_periods_and_published_before(
    shop_dir: Path,
) -> None:
    """A model reading its own earlier output through {{ this }} (first orders of customers)
    gives the same rows in the audit area as in a direct build."""
    (shop_dir / "models" / "first_orders.sql").write_text(
        "{{ config(event_time='ordered_at') }}\n"
        "select customer_id, min(ordered_at) as ordered_at from {{ ref('clean_orders') }}\n"
        "where ordered_at >= {{ start }} and ordered_at < {{ end }}\n"
        "{% if is_incremental() %}\n"
        "  and customer_id not in (select customer_id from {{ this }} "
        "where ordered_at < {{ start }})\n"
        "{% endif %}\n"
        "group by 1\n"
    )
    p = backfill.Project.load(shop_dir)
    build_plan = p.plan("first_orders", "2026-01-01", "2026-02-15", as_of=AS_OF)
    assert p.backfill(build_plan, reason="build", direct=True).run(concurrency=1).ok
    bf = p.backfill(
        p.plan("first_orders", "2026-02-01", "2026-02-15", as_of=AS_OF),
        reason="same logic",
        engine=None,
    )
    assert bf.run(concurrency=1).ok
    c = duckdb.connect(str(shop_dir / "warehouse.duckdb"), read_only=True)
    try:
        published = c.execute(
            "SELECT * FROM main.first_orders WHERE ordered_at >= DATE '2026-02-01' ORDER BY ALL"
        ).fetchall()
        audited = c.execute(
            f"SELECT * FROM {audit_schema(bf.id)}.first_orders ORDER BY ALL"
        ).fetchall()
        repeat = c.execute(
            "SELECT count(*) - count(DISTINCT customer_id) FROM main.first_orders"
        ).fetchone()
    finally:
        c.close()
    assert audited == published and len(published) > 0 and repeat == (0,)


def test_a_generated_id_that_clashes_is_drawn_again_and_a_given_one_is_refused(
    shop_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Generated ids carry random bits, and a clash (CI once drew the same 16 bits twice within
    one second) is redrawn, not an error; an id the caller chose is refused when taken."""
    from backfill.run import backfill as backfill_module
    from backfill.run.ledger import BackfillExistsError

    drawn = iter(["bf_clash", "bf_clash", "bf_fresh"])
    monkeypatch.setattr(backfill_module, "_new_id", lambda: next(drawn))
    p = backfill.Project.load(shop_dir)
    plan = p.plan("clean_orders", "2026-03-01", "2026-03-02", as_of=AS_OF)
    first = p.backfill(plan, reason="first", direct=True)
    second = p.backfill(plan, reason="second", direct=True, allow_overlap="same period")
    assert (first.id, second.id) == ("bf_clash", "bf_fresh")
    assert {r.id: r.reason for r in second.ledger.backfills()} == {
        "bf_clash": "first",
        "bf_fresh": "second",
    }
    monkeypatch.undo()
    real = backfill_module._new_id()
    assert re.fullmatch(r"bf_\d{8}_\d{6}_[0-9a-f]{8}", real), real
    with pytest.raises(BackfillExistsError, match="bf_fresh"):
        backfill_module.Backfill.create(
            p, plan, reason="third", backfill_id="bf_fresh", allow_overlap="same period"
        )
    assert len(second.ledger.backfills()) == 2
