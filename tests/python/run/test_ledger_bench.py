"""The ledger benchmark still runs (quick mode): worker processes on a throwaway Postgres (claims
of 16, of 1, and claim_task) and on SQLite finish every task exactly once, pgbench measures the
same server and so do pgbench's writes from Python processes, and the figures are printed."""

from __future__ import annotations

import json
import subprocess
import sys

from plan_helpers import ROOT


def test_ledger_bench_quick() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/ledger_bench.py"),
            "--quick",
            "--workers",
            "4",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("claims of 16", "claims of 1", "claim_task"):
        assert f"target, {label} (>= 2,000 tasks/s on Postgres, zero double claims):" in done.stdout
        assert f"target, {label} (>= 50% of pgbench's rate, " in done.stdout
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["pgbench_tps"] > 0
    # pgbench's writes from Python processes, beside it
    assert results["python_clients"]["tps"] > 0 and results["python_clients"]["ratio"] > 0
    assert "the same writes from 4 Python processes (one prepared statement each" in done.stdout
    assert set(results["postgres_runs"]) == {"16", "1", "task"}
    for r in [*results["postgres_runs"].values(), results["sqlite"]]:
        assert (r["tasks"], r["double_claims"], r["lost"], r["all_done"]) == (2000, 0, 0, True)
        assert r["attempts_done"] == r["finished_done"] == 2000 and r["tasks_per_second"] > 0
