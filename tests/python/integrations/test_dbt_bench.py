"""The dbt benchmark still runs (quick mode): a backfill through dbt writes the rows dbt writes."""

from __future__ import annotations

import json
import subprocess
import sys

from plan_helpers import ROOT


def test_dbt_bench_quick() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/dbt_bench.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "audit rows identical to dbt's: True" in done.stdout
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["identical"] and results["tasks"] == 23
    # grouping: at either concurrency, the days in one invocation, then the month and the
    # 7-day table together (3 if a thread came late)
    assert results["invocations"]["c=1"] <= 3 and results["invocations"]["c=8"] <= 3
