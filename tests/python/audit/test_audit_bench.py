"""The audit-at-scale benchmark (benchmarks/audit_bench.py) on a small fact table: the audit of a
real 90-day backfill agrees with a DuckDB FULL OUTER JOIN diff of the same rows, and records its
time split."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCH))

import audit_bench  # noqa: E402
import scale_fact  # noqa: E402


@pytest.fixture(scope="module")
def fact(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, str]:
    """The fact table (40k rows) built, fixed and backfilled over the 90-day window."""
    root = tmp_path_factory.mktemp("fact")
    return root, audit_bench.prepare(root, 40_000)


def test_audit_agrees_with_a_full_outer_join_and_reports_its_time_split(
    fact: tuple[pathlib.Path, str],
) -> None:
    root, backfill_id = fact
    audit = audit_bench.run_audit(root, backfill_id)
    duck = audit_bench.run_duckdb(root, backfill_id, "1GB")
    assert audit_bench.agree(audit, duck) == []
    # The fix changes net_amount on the nine promotion days of the window, nothing else.
    assert audit["partitions"] == 90 and audit["differing"] == len(scale_fact.PROMO_DAYS) == 9
    assert audit["changed"] > 0 and audit["added"] == audit["removed"] == 0
    assert {c for c, n in audit["columns"].items() if n} == {"net_amount"}
    assert list(audit["timings"]) == ["fingerprint scan", "key", "measure sums", "transfer", "diff"]
    assert all(v >= 0 for v in audit["timings"].values())


def test_the_benchmark_prints_both_competitors_and_the_verdicts(
    fact: tuple[pathlib.Path, str],
) -> None:
    # --dir reuses the prepared project (--quick alone builds a 1M-row one).
    out = subprocess.run(
        [sys.executable, str(BENCH / "audit_bench.py"), "--quick", "--dir", str(fact[0])],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "results agree: yes" in out.stdout
    assert "duckdb FULL OUTER JOIN" in out.stdout and "audit split" in out.stdout
    assert "target audit >= 5x faster" in out.stdout
