"""The command line: output, JSON, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from backfill.cli import main


def test_partitions_prints_utc_bounds_and_lengths(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "partitions",
            "--grain",
            "day",
            "--tz",
            "Europe/Berlin",
            "--start",
            "2026-10-24",
            "--end",
            "2026-10-27",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[2].split() == ["2026-10-25", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", "25h"]
    assert out[-1] == "3 day partition(s) in Europe/Berlin"


def test_partitions_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "partitions",
                "--grain",
                "hour",
                "--tz",
                "Europe/Berlin",
                "--json",
                "--start",
                "2026-10-25T02:00+02:00",
                "--end",
                "2026-10-25T03:00+01:00",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in rows] == ["2026-10-25T02+02:00", "2026-10-25T02+01:00"]
    assert rows[0]["start"] == "2026-10-25T00:00:00+00:00" and rows[0]["seconds"] == 3600


def test_bad_input_exits_2_and_names_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["partitions", "--grain", "day", "--start", "2026-02-30", "--end", "2026-03-02"])
    assert code == 2
    assert "2026-02-30" in capsys.readouterr().err


def test_console_script_runs_outside_the_source_tree(tmp_path) -> None:  # type: ignore[no-untyped-def]
    exe = subprocess.run(
        [sys.executable, "-c", "import backfill, sys; print(backfill.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert exe.stdout.strip().endswith("__init__.py")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill.cli",
            "partitions",
            "--grain",
            "month",
            "--start",
            "2026-01-01",
            "--end",
            "2026-04-01",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "2026-03" in out
