"""Ledger benchmark: claim throughput of worker processes sharing one ledger, Postgres beside
SQLite, and beside what the same Postgres server does at most with a task's writes (pgbench).

N no-op tasks of one backfill; W worker processes each loop ``claim(batch)`` -> ``finish`` per
task until nothing is left, once per claim size (``--batch 16,1``: a runner with many free slots,
and one with one free slot). Then the same with ``claim_task`` (``--batch task``: what every
Airflow mapped task does; worker i claims tasks i, i+W, i+2W, ... by id). The clock starts when
every worker is connected and ready, and stops when the last one is done. Afterwards the ledger's
attempts are checked: every task done, by exactly one attempt (zero double claims).

The server's own limit: ``pgbench`` with W clients on the same server and database, a
transaction of one ``UPDATE ... WHERE id = :id RETURNING`` and one ``INSERT`` on copies of the
ledger's ``tasks`` and ``attempts`` tables (their columns, checks and indexes), prepared
statements. A claim + finish of one task does at least that much writing, so tasks/s over
pgbench's transactions/s says how close the ledger comes to the server's limit; on a local
server the server's CPU per task is printed beside pgbench's per transaction (the work ratio,
which a busy machine disturbs less than the rates). Beside it, the same writes from W Python
processes as one prepared statement each through libpq's call (the ledger's fast path): what
worker processes written in Python can drive on this machine, so that the ledger's own work per
task shows apart from its language (2026-12-07: 1.30x pgbench's rate, whose transaction is four
round trips).

``--repeat N`` runs N rounds back to back, each pgbench then every claim size, and reports the
medians (each claim size's ratio against the pgbench run of its own round): on a shared
machine the load changes from minute to minute, so the figures of one run say little.

    python benchmarks/ledger_bench.py                 # 100,000 tasks, 8 workers
    python benchmarks/ledger_bench.py --quick         # 2,000 tasks (for the test suite)
    python benchmarks/ledger_bench.py --tasks 20000 --no-sqlite --repeat 3
    python benchmarks/ledger_bench.py --url postgresql://user@host/db   # a server of yours

Without ``--url`` it starts a throwaway Postgres cluster (tests/python/pg_support.py: fsync off,
as in the tests). Targets (full size), per claim size and for claim_task: >= 2,000 tasks/s and
>= 50% of pgbench's rate on Postgres, with zero double claims.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 2000.0  # tasks/s on Postgres, full size
TARGET_RATIO = 0.5  # of pgbench's transactions/s on the same server


def _pg_support() -> Any:
    """tests/python/pg_support.py, imported by path (benchmarks are not a package)."""
    spec = importlib.util.spec_from_file_location("pg_support", ROOT / "tests/python/pg_support.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["pg_support"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def worker(url: str, bid: str, mode: str, index: int, workers: int, tasks: int) -> None:
    """One worker process: connect, say ready, wait for go, claim and finish until done.
    ``mode``: a claim size, or ``task`` (claim_task of tasks index, index + workers, ...)."""
    from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
    from backfill.run.ledger import Claim, TaskEnd, new_worker_id, open_ledger

    ledger, me = open_ledger(url), new_worker_id()
    nothing = TaskFingerprint(PartitionFingerprint.empty())  # what an empty task records
    ledger.backfills(1)  # a connection of the pool is open before the clock starts
    print("ready", flush=True)
    sys.stdin.readline()
    cpu = time.process_time()
    done = lost = 0

    def end(c: Claim) -> None:
        nonlocal done, lost
        outcome = ledger.finish(c, bid, me, TaskEnd.success(0.0, 0, 0, nothing))
        done += outcome == "done"
        lost += outcome != "done"

    if mode == "task":
        for task_id in range(index, tasks, workers):
            got = ledger.claim_task(bid, task_id, me, 60.0)
            if isinstance(got, Claim):
                end(got)
            else:
                lost += 1  # done already: another process had it
    else:
        while True:
            claims = ledger.claim(bid, me, int(mode), 60.0)
            if not claims:
                break  # no deps, no retries: nothing left to claim means every task is claimed
            for c in claims:
                end(c)
    print(
        json.dumps(
            {"done": done, "lost": lost, "end": time.time(), "cpu": time.process_time() - cpu}
        ),
        flush=True,
    )
    ledger.close()


def server_cpu(data: Path | None) -> float:
    """CPU seconds the local Postgres cluster at ``data`` has used (the postmaster, its live
    children and the ones it reaped); 0 for a server elsewhere."""
    if data is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    master = int((data / "postmaster.pid").read_text().split()[0])
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # the process ended meanwhile
        pid = int(stat.parent.name)
        if pid == master or int(fields[1]) == master:
            total += int(fields[11]) + int(fields[12])  # utime, stime
            if pid == master:
                total += int(fields[13]) + int(fields[14])  # reaped children's
    return total / tick


def vacuum(url: str) -> None:
    """Untimed, before each run on Postgres: VACUUM ANALYZE of the ledger's tables, so that a
    run does not pay for the dead rows of the runs before it (autovacuum would, at a moment of
    its choosing) and every claim size starts from the same state."""
    if not url.startswith("postgres"):
        return
    import psycopg

    with psycopg.connect(url.split("?")[0], autocommit=True) as db:
        db.execute(
            "VACUUM ANALYZE backfill_ledger.tasks, backfill_ledger.attempts, "
            "backfill_ledger.leases, backfill_ledger.backfills"
        )


def run_workers(
    argvs: list[list[str]], data: Path | None
) -> tuple[list[dict[str, Any]], float, float]:
    """Starts this script once per argument list, waits until each says ready, then says go to
    all; returns each one's last line (JSON with ``end``), the seconds from go to the last end,
    and the local server's CPU seconds meanwhile."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start, server_before = time.time(), server_cpu(data)
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    reports = []
    for p, argv in zip(procs, argvs, strict=True):
        out, _ = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"a worker ({argv[0]}) failed (exit {p.returncode})")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports, max(r["end"] for r in reports) - start, server_cpu(data) - server_before


def measure(
    url: str, tasks: int, workers: int, mode: str, data: Path | None = None
) -> dict[str, Any]:
    """One run against the ledger at ``url``: tasks/s, CPU per task (the workers', and the
    server's when it runs here from ``data``) and the exactly-once checks."""
    from backfill.run.ledger import open_ledger

    ledger = open_ledger(url)
    vacuum(url)
    bid = f"bf_bench_{int(time.time() * 1000)}"
    record = {
        "id": bid,
        "project": "bench",
        "project_root": None,
        "selection": "m",
        "exclude": None,
        "start": "2026-01-01",
        "end": "2026-02-01",
        "as_of": None,
        "reason": "benchmark",
        "mode": "audit",
        "engine": "none",
        "plan": "{}",
        "models": "{}",
        "created_by": "bench",
    }
    began = time.perf_counter()
    ledger.create_backfill(
        record,
        [
            {
                "task_id": i,
                "model": "m",
                "start": None,
                "end": None,
                "label": f"p{i}",
                "partitions": 1,
                "wave": 0,
                "depends_on": [],
            }
            for i in range(tasks)
        ],
    )
    create_s = time.perf_counter() - began
    reports, seconds, server_s = run_workers(
        [["--worker", url, bid, mode, *map(str, (i, workers, tasks))] for i in range(workers)],
        data,
    )
    attempts = ledger.attempts(bid)
    per_task = Counter(a["task_id"] for a in attempts)
    statuses = Counter(t.status for t in ledger.tasks(bid))
    ledger.close()
    return {
        "tasks": tasks,
        "workers": workers,
        "batch": mode,
        "seconds": seconds,
        "tasks_per_second": tasks / seconds,
        "create_seconds": create_s,
        "client_cpu_ms_per_task": 1000 * sum(r["cpu"] for r in reports) / tasks,
        "server_cpu_ms_per_task": 1000 * server_s / tasks,
        "finished_done": sum(r["done"] for r in reports),
        "lost": sum(r["lost"] for r in reports),
        "double_claims": sum(n - 1 for n in per_task.values() if n > 1),
        "all_done": statuses == Counter({"done": tasks}),
        "attempts_done": sum(a["status"] == "done" for a in attempts),
    }


PGBENCH_SCRIPT = """\\set id random(0, {last})
BEGIN;
UPDATE pgbench_ledger.tasks SET status = 'running', attempts = attempts + 1, not_before = 0,
    started_at = now()::text, error = NULL
    WHERE backfill_id = 'bf_pgbench' AND task_id = :id RETURNING task_id, attempts;
INSERT INTO pgbench_ledger.attempts (backfill_id, task_id, attempt, worker, status, started_at)
    VALUES ('bf_pgbench', :id, 1, 'pgbench', 'running', now()::text);
END;
"""


def pgbench_binary() -> str:
    """Debian's pgbench (package postgresql-<major>, beside the server) or one on PATH."""
    found = _pg_support().pg_bindir() / "pgbench"
    if found.exists():
        return str(found)
    on_path = shutil.which("pgbench")
    if on_path is None:
        raise SystemExit("pgbench not found (Debian: the postgresql package; `make` installs it)")
    return on_path


@contextlib.contextmanager
def pgbench_tables(url: str, rows: int) -> Iterator[None]:
    """Schema pgbench_ledger with copies of the ledger's backfills, tasks (``rows`` pending
    rows of backfill bf_pgbench) and attempts tables (their columns, checks and indexes), for
    the length of the block."""
    import psycopg

    from backfill.run.ledger import open_ledger

    open_ledger(url).close()  # the ledger's tables, to copy (made when first opened)
    vacuum(url)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP SCHEMA IF EXISTS pgbench_ledger CASCADE")
        db.execute("CREATE SCHEMA pgbench_ledger")
        for table in ("backfills", "tasks", "attempts"):
            db.execute(
                f"CREATE TABLE pgbench_ledger.{table} (LIKE backfill_ledger.{table} INCLUDING ALL)"
            )
        # its own id sequence: the copied default would draw from the ledger's
        db.execute("CREATE SEQUENCE pgbench_ledger.attempts_id")
        db.execute(
            "ALTER TABLE pgbench_ledger.attempts ALTER COLUMN id "
            "SET DEFAULT nextval('pgbench_ledger.attempts_id')"
        )
        db.execute(
            "INSERT INTO pgbench_ledger.tasks (backfill_id, task_id, model, label, partitions, "
            "wave, status) SELECT 'bf_pgbench', i, 'm', 'p' || i, 1, 0, 'pending' "
            "FROM generate_series(0, %s) AS i",
            (rows - 1,),
        )
        db.execute("VACUUM ANALYZE pgbench_ledger.tasks")
    try:
        yield
    finally:
        with psycopg.connect(url, autocommit=True) as db:
            db.execute("DROP SCHEMA pgbench_ledger CASCADE")


def pgbench(
    url: str, clients: int, rows: int, seconds: float, data: Path | None = None
) -> dict[str, float]:
    """pgbench with ``clients`` clients on the server at ``url``: one UPDATE by key with
    RETURNING and one INSERT per transaction (PGBENCH_SCRIPT), prepared, on
    :func:`pgbench_tables`. Returns its transactions/s (``tps``) and, for a server running here
    from ``data``, the server's CPU per transaction (``server_cpu_ms``, else 0)."""
    with pgbench_tables(url, rows), tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "claim.sql"
        script.write_text(PGBENCH_SCRIPT.format(last=rows - 1))
        server_before = server_cpu(data)
        done = subprocess.run(
            [
                pgbench_binary(),
                "-n",  # no vacuum of pgbench's own tables (there are none)
                "-M",
                "prepared",
                "-c",
                str(clients),
                "-j",
                str(min(clients, os.cpu_count() or 1)),
                "-T",
                str(max(1, round(seconds))),
                "-f",
                str(script),
                url,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        server_s = server_cpu(data) - server_before
    found = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", done.stdout)
    count = re.search(r"number of transactions actually processed: ([0-9]+)", done.stdout)
    if done.returncode != 0 or found is None or count is None:
        raise SystemExit(f"pgbench failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return {
        "tps": float(found.group(1)),
        "server_cpu_ms": 1000 * server_s / max(1, int(count.group(1))),
    }


def script_worker(url: str, index: int, clients: int, rows: int) -> None:
    """One process of :func:`python_clients`: PGBENCH_SCRIPT's writes ``rows // clients``
    times on random ids (as pgbench draws them), as lean as Python drives Postgres: one
    statement (the UPDATE in a CTE, the INSERT of its row) in autocommit, so one round trip a
    transaction where pgbench makes four, through libpq's prepared call (the ledger's fast
    path, :mod:`backfill.run.ledger.postgres_fast`)."""
    import random

    import psycopg

    from backfill.run.ledger.postgres_fast import INT4, execute_prepared

    sql = (
        b"WITH u AS (UPDATE pgbench_ledger.tasks SET status = 'running', "
        b"attempts = attempts + 1, not_before = 0, started_at = now()::text, error = NULL "
        b"WHERE backfill_id = 'bf_pgbench' AND task_id = $1 RETURNING task_id, attempts) "
        b"INSERT INTO pgbench_ledger.attempts (backfill_id, task_id, attempt, worker, status, "
        b"started_at) SELECT 'bf_pgbench', task_id, 1, 'python', 'running', now()::text FROM u "
        b"RETURNING task_id"
    )
    draw = random.Random(index)
    with psycopg.connect(url, autocommit=True) as db:
        print("ready", flush=True)
        sys.stdin.readline()
        cpu = time.process_time()
        for _ in range(rows // clients):
            execute_prepared(db, b"bench_script", sql, (draw.randrange(rows),), (INT4,))
        print(json.dumps({"end": time.time(), "cpu": time.process_time() - cpu}), flush=True)


def python_clients(url: str, clients: int, rows: int, data: Path | None = None) -> dict[str, float]:
    """What worker processes written in Python can drive at most on this machine: pgbench's
    transaction (the same writes, on :func:`pgbench_tables`) from ``clients`` processes
    (:func:`script_worker`), ``rows`` transactions in all and nothing else per transaction. A
    task's claim writes at least that much, so a Python worker's claims of one task cannot
    come nearer pgbench's rate than this. Returns ``tps``, ``client_cpu_ms`` and
    ``server_cpu_ms`` per transaction."""
    with pgbench_tables(url, rows):
        reports, seconds, server_s = run_workers(
            [["--script-worker", url, *map(str, (i, clients, rows))] for i in range(clients)],
            data,
        )
    done = clients * (rows // clients)
    return {
        "tps": done / seconds,
        "client_cpu_ms": 1000 * sum(r["cpu"] for r in reports) / done,
        "server_cpu_ms": 1000 * server_s / done,
    }


def _label(mode: str) -> str:
    return "claim_task" if mode == "task" else f"claims of {mode}"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} {five:.1f} {fifteen:.1f}"


def summary(rounds: list[dict[str, Any]], modes: list[str]) -> dict[str, dict[str, Any]]:
    """Per claim size, the medians over the rounds: tasks/s, its ratio to the same round's
    pgbench rate, CPU per task; the checks summed (any double claim in any round counts)."""
    out: dict[str, dict[str, Any]] = {}
    for m in modes:
        runs = [r[m] for r in rounds]
        med = {
            k: statistics.median(r[k] for r in runs)
            for k in (
                "tasks_per_second",
                "seconds",
                "create_seconds",
                "client_cpu_ms_per_task",
                "server_cpu_ms_per_task",
            )
        }
        ratios = [r[m]["tasks_per_second"] / r["pgbench"]["tps"] for r in rounds if "pgbench" in r]
        out[m] = {
            **med,
            "tasks": runs[0]["tasks"],
            "rounds": len(runs),
            "ratio": statistics.median(ratios) if ratios else None,
            "double_claims": sum(r["double_claims"] for r in runs),
            "lost": sum(r["lost"] for r in runs),
            "all_done": all(r["all_done"] and r["attempts_done"] == r["tasks"] for r in runs),
            # the round farthest from one done attempt and one finish per task (every round's
            # are equal when all is well)
            **{
                k: max((r[k] for r in runs), key=lambda v: abs(v - runs[0]["tasks"]))
                for k in ("attempts_done", "finished_done")
            },
        }
    return out


def print_runs(
    runs: dict[str, dict[str, Any]], pgbench_rate: dict[str, float] | None, *, local: bool
) -> None:
    """Per claim size (medians over the rounds): tasks/s, its ratio to pgbench's rate, the
    checks, CPU per task beside pgbench's server CPU per transaction."""
    for m, pg in runs.items():
        ratio = f", {pg['ratio']:.2f}x pgbench" if pg["ratio"] is not None else ""
        print(
            f"postgres, {_label(m)}: {pg['tasks_per_second']:8,.0f} tasks/s{ratio} "
            f"({pg['seconds']:.2f} s; backfill recorded in {pg['create_seconds']:.2f} s); "
            f"double claims: {pg['double_claims']}, lost: {pg['lost']}, "
            f"all done once: {pg['all_done']}"
        )
        cpu_ms = pg["client_cpu_ms_per_task"] + pg["server_cpu_ms_per_task"]
        versus = (
            f" ({pg['server_cpu_ms_per_task'] / pgbench_rate['server_cpu_ms']:.1f}x pgbench's "
            "per transaction)"
            if local and pgbench_rate and pgbench_rate["server_cpu_ms"] > 0
            else ""
        )
        print(
            f"          CPU per task: {pg['client_cpu_ms_per_task']:.2f} ms in the workers + "
            f"{pg['server_cpu_ms_per_task']:.2f} ms in the server{versus}"
            + (
                f" -> at most {os.cpu_count() or 1:,} cores / {cpu_ms:.2f} ms = "
                f"{1000 * (os.cpu_count() or 1) / cpu_ms:,.0f} tasks/s on this machine when idle"
                if local
                else ""
            )
        )


def print_targets(runs: dict[str, dict[str, Any]], exact: bool, quick: bool) -> None:
    """The met/not met lines: per claim size, >= TARGET tasks/s and >= TARGET_RATIO of pgbench."""
    note = " (quick run: indicative only)" if quick else ""
    for m, pg in runs.items():
        fast = exact and pg["tasks_per_second"] >= TARGET
        print(
            f"target, {_label(m)} (>= {TARGET:,.0f} tasks/s on Postgres, zero double claims): "
            f"{'met' if fast else 'not met'}{note}"
        )
        if pg["ratio"] is not None:
            near = exact and pg["ratio"] >= TARGET_RATIO
            print(
                f"target, {_label(m)} (>= {TARGET_RATIO:.0%} of pgbench's rate, "
                f"{pg['ratio']:.2f}x): {'met' if near else 'not met'}{note}"
            )


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 tasks")
    ap.add_argument("--tasks", type=int, default=None, help="tasks (default 100,000)")
    ap.add_argument(
        "--sqlite-tasks", type=int, default=None, help="tasks of the SQLite run (default: the same)"
    )
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument(
        "--batch",
        default="16,1,task",
        help="claim sizes to measure, comma-separated; 'task' is claim_task (default 16,1,task)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of pgbench then every claim size, back to back; medians are reported",
    )
    ap.add_argument(
        "--pgbench-seconds", type=float, default=None, help="pgbench's run (default 20 s; 3 quick)"
    )
    ap.add_argument("--no-pgbench", action="store_true", help="skip the pgbench run")
    ap.add_argument("--url", help="a Postgres server of yours (default: a throwaway one)")
    ap.add_argument("--no-sqlite", action="store_true", help="skip the SQLite run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.tasks = args.tasks or (2000 if args.quick else 100_000)
    args.modes = [m.strip() for m in args.batch.split(",") if m.strip()]
    for m in args.modes:
        if m != "task" and not (m.isdigit() and int(m) > 0):
            ap.error(f"--batch: {m!r} is neither a claim size nor 'task'")
    if args.repeat < 1:
        ap.error(f"--repeat: {args.repeat} rounds; expected 1 or more")
    return args


def run_rounds(args: argparse.Namespace, url: str, data: Path | None) -> list[dict[str, Any]]:
    """``args.repeat`` rounds, each pgbench then every claim size, on the server at ``url``."""
    rounds: list[dict[str, Any]] = []
    for n in range(args.repeat):
        one: dict[str, Any] = {"load": _load()}
        if not args.no_pgbench:
            seconds = args.pgbench_seconds or (3.0 if args.quick else 20.0)
            one["pgbench"] = pgbench(url, args.workers, args.tasks, seconds, data)
            one["python"] = python_clients(url, args.workers, args.tasks, data)
        for m in args.modes:
            one[m] = measure(url, args.tasks, args.workers, m, data)
        rounds.append(one)
        if args.repeat > 1:
            bench = (
                f"pgbench {one['pgbench']['tps']:,.0f} tx/s, the same from Python "
                f"{one['python']['tps']:,.0f} tx/s; "
                if "pgbench" in one
                else ""
            )
            print(
                f"round {n + 1} (load {one['load']}): {bench}"
                + ", ".join(
                    f"{_label(m)} {one[m]['tasks_per_second']:,.0f} tasks/s" for m in args.modes
                ),
                flush=True,
            )
    return rounds


def main() -> int:
    if len(sys.argv) == 8 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:5], *(int(a) for a in sys.argv[5:8]))
        return 0
    if len(sys.argv) == 6 and sys.argv[1] == "--script-worker":
        script_worker(sys.argv[2], *(int(a) for a in sys.argv[3:6]))
        return 0
    args = parse_args()
    tasks, modes = args.tasks, args.modes
    server = None
    url = args.url
    if url is None:
        server = _pg_support().PgServer.start()
        url = server.create_database("bench")
    load_before = _load()
    try:
        rounds = run_rounds(args, url, server.data if server else None)
    finally:
        if server is not None:
            server.stop()
    runs = summary(rounds, modes)
    bench_rate = (
        {k: statistics.median(r["pgbench"][k] for r in rounds) for k in ("tps", "server_cpu_ms")}
        if not args.no_pgbench
        else None
    )
    results: dict[str, Any] = {"postgres": runs[modes[0]], "postgres_runs": runs, "rounds": rounds}
    if bench_rate is not None:
        results["pgbench_tps"] = bench_rate["tps"]
        results["pgbench_server_cpu_ms"] = bench_rate["server_cpu_ms"]
    medians = f"medians of {args.repeat} rounds, " if args.repeat > 1 else ""
    print(
        f"{tasks:,} no-op tasks, {args.workers} worker processes, on {os.cpu_count() or 1} cores "
        f"({medians}load average {load_before} before, {_load()} after: figures from a busy "
        "machine are lower)"
    )
    if bench_rate is not None:
        cpu = f"; {bench_rate['server_cpu_ms']:.3f} ms of server CPU each" if server else ""
        print(
            f"pgbench (the server's limit): {bench_rate['tps']:8,.0f} transactions/s, "
            f"{args.workers} clients, one UPDATE ... RETURNING + one INSERT each{cpu}"
        )
        py = {
            k: statistics.median(r["python"][k] for r in rounds)
            for k in ("tps", "client_cpu_ms", "server_cpu_ms")
        }
        py_ratio = statistics.median(r["python"]["tps"] / r["pgbench"]["tps"] for r in rounds)
        results["python_clients"] = {**py, "ratio": py_ratio}
        cpu = (
            f"; {py['client_cpu_ms']:.3f} ms of CPU in the clients + {py['server_cpu_ms']:.3f} "
            "ms in the server each"
            if server
            else ""
        )
        print(
            f"the same writes from {args.workers} Python processes (one prepared statement each, "
            "libpq's call): "
            f"{py['tps']:8,.0f} transactions/s = {py_ratio:.2f}x pgbench{cpu}: a Python "
            f"worker's claim of one task (at least this transaction) cannot come nearer "
            f"pgbench's rate on this machine"
        )
    print_runs(runs, bench_rate, local=server is not None)
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            lite = measure(
                f"sqlite:///{tmp}/ledger.sqlite", args.sqlite_tasks or tasks, args.workers, modes[0]
            )
        results["sqlite"] = lite
        pg = runs[modes[0]]
        print(
            f"sqlite, {_label(modes[0])}: {lite['tasks_per_second']:8,.0f} tasks/s "
            f"({lite['seconds']:.2f} s, {lite['tasks']:,} tasks); "
            f"double claims: {lite['double_claims']}"
        )
        print(f"ratio postgres / sqlite: {pg['tasks_per_second'] / lite['tasks_per_second']:.2f}x")
    checked = [r[m] for r in rounds for m in modes] + [
        results[k] for k in ("sqlite",) if k in results
    ]
    exact = all(
        r["double_claims"] == 0
        and r["lost"] == 0
        and r["all_done"]
        and r["attempts_done"] == r["tasks"]
        for r in checked
    )
    print_targets(runs, exact, args.quick)
    if args.json:
        print(json.dumps(results))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
