"""The diff and fingerprint benchmarks still run (their --quick modes) and their tools agree."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.mark.parametrize("name", ["diff_bench.py", "fingerprint_bench.py"])
def test_quick_benchmark_runs(name: str) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / name), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    if name == "diff_bench.py":
        assert "all tools agree" in out.stdout
        assert "duckdb:" in out.stdout and "polars join:" in out.stdout
        # Both paths are compared against DuckDB with a composite key.
        assert "composite key, key-ordered (merge path)" in out.stdout
        assert "composite key, shuffled (hash path)" in out.stdout
    else:
        assert "order/chunking invariance check: ok" in out.stdout
        assert "GB/s per core" in out.stdout
