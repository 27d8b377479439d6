"""The Kafka replay benchmark still runs (its --quick mode, on the session's broker): both sides
land the same rows and the ratio is reported with its verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from plan_helpers import ROOT

pytest.importorskip("confluent_kafka")


def test_kafka_bench_quick(kafka_broker: Any) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/kafka_bench.py"),
            "--quick",
            "--json",
            "--bootstrap",
            kafka_broker.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "same rows on both sides: True" in done.stdout
    assert "target >= 0.5x: " in done.stdout
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["identical"] and results["records"] == 20_000
    assert results["replay_s"] > 0 and results["bare_s"] > 0
    assert results["met"] == (results["ratio"] >= 0.5)
