"""The Postgres benchmark still runs (quick mode): the shop backfill on Postgres and on DuckDB
publish the same rows, the ratio is reported, and so are the targets of the initial build and
of `backfill demo` (run as users run it, in new processes)."""

from __future__ import annotations

import json
import subprocess
import sys

from plan_helpers import ROOT


def test_postgres_bench_quick() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/postgres_bench.py"), "--quick", "--demo", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "published fct_daily_sales identical on both engines: True" in done.stdout
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["identical"] and results["ratio_total"] > 0
    assert set(results["ratio"]) == {"build", "plain", "run", "audit", "publish"}
    assert results["orders_per_day"] == 12 and set(results["demo"]) == {"duckdb", "postgres"}
    lines = done.stdout.splitlines()
    build = [x for x in lines if x.startswith("initial build at 12 orders a day: postgres ")]
    demo = [x for x in lines if x.startswith("backfill demo (new process, median of 1): postgres ")]
    assert len(build) == 1 and build[0].endswith(("(target <= 3x): met", "(target <= 3x): NOT met"))
    assert len(demo) == 1 and demo[0].endswith(("(target <= 4x): met", "(target <= 4x): NOT met"))
    # the warehouses' own floor beside the build (it checks that its tables hold the build's rows)
    assert any(x.startswith("  the warehouses' floor (plain CREATE TABLE AS") for x in lines)
    assert all(results["median"][e]["plain"] > 0 for e in ("duckdb", "postgres"))
