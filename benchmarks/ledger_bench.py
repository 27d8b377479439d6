"""Ledger benchmark: claim throughput of worker processes sharing one ledger, Postgres beside
SQLite.

N no-op tasks of one backfill; W worker processes each loop ``claim(batch)`` -> ``finish`` per
task until nothing is left. The clock starts when every worker is connected and ready, and stops
when the last one is done. Afterwards the ledger's attempts are checked: every task done, by
exactly one attempt (zero double claims).

    python benchmarks/ledger_bench.py                 # 100,000 tasks, 8 workers
    python benchmarks/ledger_bench.py --quick         # 2,000 tasks (for the test suite)
    python benchmarks/ledger_bench.py --url postgresql://user@host/db   # a server of yours

Without ``--url`` it starts a throwaway Postgres cluster (tests/python/pg_support.py: fsync off,
as in the tests). Target (full size): >= 2,000 tasks/s on Postgres with zero double claims.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 2000.0  # tasks/s on Postgres, full size


def _pg_support() -> Any:
    """tests/python/pg_support.py, imported by path (benchmarks are not a package)."""
    spec = importlib.util.spec_from_file_location("pg_support", ROOT / "tests/python/pg_support.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["pg_support"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def worker(url: str, bid: str, batch: int) -> None:
    """One worker process: connect, say ready, wait for go, claim and finish until done."""
    from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
    from backfill.run.ledger import TaskEnd, new_worker_id, open_ledger

    ledger, me = open_ledger(url), new_worker_id()
    nothing = TaskFingerprint(PartitionFingerprint.empty())  # what an empty task records
    ledger.backfills(1)  # a connection of the pool is open before the clock starts
    print("ready", flush=True)
    sys.stdin.readline()
    cpu = time.process_time()
    done = lost = 0
    while True:
        claims = ledger.claim(bid, me, batch, 60.0)
        if not claims:
            break  # no deps, no retries: nothing left to claim means every task is claimed
        for c in claims:
            outcome = ledger.finish(c, bid, me, TaskEnd.success(0.0, 0, 0, nothing))
            done += outcome == "done"
            lost += outcome != "done"
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


def measure(
    url: str, tasks: int, workers: int, batch: int, data: Path | None = None
) -> dict[str, Any]:
    """One run against the ledger at ``url``: tasks/s, CPU per task (the workers', and the
    server's when it runs here from ``data``) and the exactly-once checks."""
    from backfill.run.ledger import open_ledger

    ledger = open_ledger(url)
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
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", url, bid, str(batch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start, server_before = time.time(), server_cpu(data)
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    reports = []
    for p in procs:
        out, _ = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"a worker failed (exit {p.returncode})")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    seconds = max(r["end"] for r in reports) - start
    server_s = server_cpu(data) - server_before
    attempts = ledger.attempts(bid)
    per_task = Counter(a["task_id"] for a in attempts)
    statuses = Counter(t.status for t in ledger.tasks(bid))
    ledger.close()
    return {
        "tasks": tasks,
        "workers": workers,
        "batch": batch,
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


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 tasks")
    ap.add_argument("--tasks", type=int, default=None, help="tasks (default 100,000)")
    ap.add_argument(
        "--sqlite-tasks", type=int, default=None, help="tasks of the SQLite run (default: the same)"
    )
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16, help="tasks per claim")
    ap.add_argument("--url", help="a Postgres server of yours (default: a throwaway one)")
    ap.add_argument("--no-sqlite", action="store_true", help="skip the SQLite run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tasks = args.tasks or (2000 if args.quick else 100_000)
    server = None
    url = args.url
    if url is None:
        server = _pg_support().PgServer.start()
        url = server.create_database("bench")
    try:
        pg = measure(url, tasks, args.workers, args.batch, server.data if server else None)
    finally:
        if server is not None:
            server.stop()
    results: dict[str, Any] = {"postgres": pg}
    print(f"{tasks:,} no-op tasks, {args.workers} worker processes, claims of {args.batch}")
    print(
        f"postgres: {pg['tasks_per_second']:8,.0f} tasks/s ({pg['seconds']:.2f} s; backfill "
        f"recorded in {pg['create_seconds']:.2f} s); double claims: {pg['double_claims']}, "
        f"lost: {pg['lost']}, all done once: {pg['all_done'] and pg['attempts_done'] == tasks}"
    )
    cpu_ms = pg["client_cpu_ms_per_task"] + pg["server_cpu_ms_per_task"]
    print(
        f"          CPU per task: {pg['client_cpu_ms_per_task']:.2f} ms in the workers + "
        f"{pg['server_cpu_ms_per_task']:.2f} ms in the server"
        + (
            f" -> at most {os.cpu_count() or 1:,} cores / {cpu_ms:.2f} ms = "
            f"{1000 * (os.cpu_count() or 1) / cpu_ms:,.0f} tasks/s on this machine when idle "
            f"(load average now {os.getloadavg()[0]:.1f})"
            if server
            else ""
        )
    )
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            lite = measure(
                f"sqlite:///{tmp}/ledger.sqlite",
                args.sqlite_tasks or tasks,
                args.workers,
                args.batch,
            )
        results["sqlite"] = lite
        print(
            f"sqlite:   {lite['tasks_per_second']:8,.0f} tasks/s ({lite['seconds']:.2f} s, "
            f"{lite['tasks']:,} tasks); double claims: {lite['double_claims']}"
        )
        print(f"ratio postgres / sqlite: {pg['tasks_per_second'] / lite['tasks_per_second']:.2f}x")
    exact = all(
        r["double_claims"] == 0
        and r["lost"] == 0
        and r["all_done"]
        and r["attempts_done"] == r["tasks"]
        for r in results.values()
    )
    met = exact and pg["tasks_per_second"] >= TARGET
    print(
        f"target (>= {TARGET:,.0f} tasks/s on Postgres, zero double claims): "
        f"{'met' if met else 'not met'}{' (quick run: indicative only)' if args.quick else ''}"
    )
    if args.json:
        print(json.dumps(results))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
