"""The Postgres benchmark still runs (quick mode): the shop backfill on Postgres and on DuckDB
publish the same rows, and the ratio is reported."""

from __future__ import annotations

import json
import subprocess
import sys

from plan_helpers import ROOT


def test_postgres_bench_quick() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/postgres_bench.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "published fct_daily_sales identical on both engines: True" in done.stdout
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["identical"] and results["ratio_total"] > 0
    assert set(results["ratio"]) == {"build", "run", "audit", "publish"}
