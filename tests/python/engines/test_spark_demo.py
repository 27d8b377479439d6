"""`backfill demo --engine spark` tells the DuckDB demo's story with the same numbers: the same
raw data (generated once, loaded into Iceberg as Arrow), the same plan, and an audit, changelog
and consumer message that are equal line for line (ids and times aside). A shorter backfill than
the story's 89 days keeps it fast; the code paths are the same."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from backfill.cli.demo import run_demo
from backfill.cli.exit_codes import EXIT_OK

SPAN = ("2026-08-01", "2026-08-04")  # 3 days: 3 daily, 1 monthly, 9 rolling-window tasks
BUILD = ("2026-07-01", "2026-09-01")  # what those tasks read
ORDERS = 40


def _sections(out: str) -> dict[str, str]:
    """Steps 6 (audit), 8 (changelog) and 9 (message), with ids, times and paths masked."""
    steps = dict(re.findall(r"^== (\d)\. [^\n]*\n(.*?)(?=^== \d\. |\Z)", out, re.M | re.S))
    masked = {}
    for n in ("6", "8", "9"):
        text = steps[n].split("\ndone; the project is in", 1)[0]
        text = re.sub(r"bf_\d{8}_\d{6}_[0-9a-f]{8}", "bf_ID", text)
        text = re.sub(r"pub_[0-9a-f]+", "pub_ID", text)
        masked[n] = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?(\+00:00)?", "TIME", text)
    return masked


def test_the_spark_demo_prints_the_duckdb_demos_audit_and_changelog(tmp_path: Path) -> None:
    import spark_support
    from backfill.engines.spark import SparkEngine

    spark_support.ensure_plugin()
    # The test session's one SparkSession, with the tests' small-data settings (the demo would
    # otherwise start one with Spark's defaults, which every later Spark test would inherit).
    SparkEngine(tmp_path / "unused", master="local[2]", conf=spark_support.CONF).spark  # noqa: B018
    outs = {}
    for engine in ("duckdb", "spark"):
        buf = io.StringIO()
        code = run_demo(
            tmp_path / engine,
            orders_per_day=ORDERS,
            concurrency=2,
            out=buf,
            engine=engine,
            span=SPAN,
            build=BUILD,
        )
        outs[engine] = buf.getvalue()
        assert code == EXIT_OK, outs[engine]
    duck, spark = _sections(outs["duckdb"]), _sections(outs["spark"])
    assert "gates passed" in duck["6"] and "fct_daily_sales: 3 of 3 partition(s)" in duck["6"]
    assert re.search(r"revenue -[\d,.]+ \(-\d\.\d\d%\)", duck["8"]), duck["8"]
    for n in ("6", "8", "9"):
        assert spark[n] == duck[n], f"step {n}\n--- duckdb\n{duck[n]}\n--- spark\n{spark[n]}"
