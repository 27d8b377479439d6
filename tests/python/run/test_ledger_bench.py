"""The ledger benchmark still runs (quick mode): worker processes on a throwaway Postgres and on
SQLite finish every task exactly once, and the figures are printed."""

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
    assert "target (>= 2,000 tasks/s on Postgres, zero double claims):" in done.stdout
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for backend in ("postgres", "sqlite"):
        r = results[backend]
        assert (r["tasks"], r["double_claims"], r["lost"], r["all_done"]) == (2000, 0, 0, True)
        assert r["attempts_done"] == r["finished_done"] == 2000 and r["tasks_per_second"] > 0
