"""The run and publish benchmarks at scale (issue 18, targets 4 and 5) still run in quick mode
on a small fact table, and every path agrees: each backfill's audit area equals the monolithic
CTAS of the same SQL row for row, and the published window equals it after publish (timing is
checked by the full-size benchmarks themselves)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from plan_helpers import ROOT

ROWS = "36500"  # 100 raw rows a day: the paths, not the timing


def _bench(name: str, directory: Path, *extra: str) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / name),
            "--quick",
            "--rows",
            ROWS,
            "--dir",
            str(directory),
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_run_and_publish_bench_quick(tmp_path: Path) -> None:
    fact = tmp_path / "fact"  # built once, shared by both benchmarks
    run = _bench("run_bench.py", fact)
    assert run["identical"] is True
    assert run["tasks"] == {"ctas": 1, "one day": 90, "ten days": 9}
    breakdown = run["breakdown"]
    assert isinstance(breakdown, dict) and breakdown["tasks"] == 90
    assert breakdown["model_query_ms"] > 0 and breakdown["overhead_ms"] > 0
    pub = _bench("publish_bench.py", fact)
    assert pub["identical"] is True and pub["mixed_answers"] == 0
    assert pub["backup_ratio"] > 0 and pub["rollback_ratio"] > 0


def test_publish_bench_quick_on_postgres(tmp_path: Path, pg_server: Any) -> None:
    """The same publish, publish+backup and rollback on PostgreSQL (the session's server)."""
    url = pg_server.create_database("publish_bench")
    pub = _bench("publish_bench.py", tmp_path / "fact", "--engine", "postgres", "--url", url)
    assert pub["identical"] is True and pub["mixed_answers"] == 0
    assert pub["engine"] == "postgres"
