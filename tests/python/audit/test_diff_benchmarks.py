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


def test_quick_crossdiff_benchmark_against_reladiff() -> None:
    """crossdiff_bench --quick: backfill.diff_tables and reladiff on the same PostgreSQL and
    DuckDB tables in the three cases; both find exactly the rows each case changed, and each
    target is reported met or not met."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "crossdiff_bench.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "all counts agree" in text
    assert "counts agree (backfill 0, reladiff 0, changed by the case 0)" in text
    assert "counts agree (backfill 200, reladiff 200, changed by the case 200)" in text
    assert "counts agree (backfill 20,000, reladiff 20,000, changed by the case 20,000)" in text
    for case, need in (("a", 5), ("b", 5), ("c", 10)):
        head = f"target backfill >= {need}x faster than reladiff, ({case}): "
        line = next(x for x in text.splitlines() if x.startswith(head))
        assert line.startswith((head + "met (", head + "not met (")), line
    assert "data-diff's anchor" in text
