"""The planner benchmark still runs (quick mode) and its planners agree."""

from __future__ import annotations

import json
import subprocess
import sys

from plan_helpers import ROOT


def test_plan_bench_quick() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/plan_bench.py"),
            "--quick",
            "--repeat",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "task sets identical: True" in done.stdout
    assert "ratio Python / C++:" in done.stdout
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["identical"] and results["tasks"] > 50_000
    assert results["ratio"] > 5  # the full-size targets are checked by the benchmark itself
