"""``backfill plan`` on the shop example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backfill import cli
from plan_helpers import ROOT

SHOP = str(ROOT / "examples/shop/project.py")
ARGS = [
    "plan",
    "--project",
    SHOP,
    "--select",
    "fct_daily_sales+",
    "--start",
    "2026-08-01",
    "--end",
    "2026-10-29",
    "--as-of",
    "2026-11-30",
]


def test_plan_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*ARGS, "--partitions-per-run", "1"]) == 0
    out = capsys.readouterr().out
    # a project without a ledger has measured nothing: no made-up estimate
    assert out.startswith("3 models, 187 tasks; no cost data for 3 models: no estimate")
    assert "fct_sales_7d       day              95       95      1          ?" in out
    assert cli.main([*ARGS, "--concurrency", "2"]) == 0  # auto: a task per slot, <= 31 days
    out = capsys.readouterr().out
    assert out.startswith("3 models, 9 tasks; no cost data")
    assert "fct_sales_7d       day              95        4     31" in out
    with pytest.raises(SystemExit) as exit_:
        cli.main([*ARGS, "--partitions-per-run", "0"])
    assert exit_.value.code == 2
    assert "expected 'auto' or a positive integer" in capsys.readouterr().err


def test_plan_json_and_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*ARGS, "--json", "--cost", "fct_daily_sales=240", "--concurrency", "10"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["partitions"] for m in data["models"]] == [89, 3, 95]
    assert data["models"][0]["work_seconds"] == 89 * 240 and data["estimate"]["concurrency"] == 10
    assert cli.main([*ARGS, "--mermaid", "--partitions-per-run", "1"]) == 0
    assert capsys.readouterr().out.startswith('flowchart LR\n  m0["fct_daily_sales<br/>')
    assert cli.main([*ARGS, "--mermaid"]) == 0  # auto: few tasks, each node a batch
    assert capsys.readouterr().out.startswith(
        'flowchart LR\n  t0["fct_daily_sales<br/>2026-08-01, 23 partitions"]'
    )


def test_plan_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main([*ARGS[:4], "fct_nope", *ARGS[5:]]) == 2
    assert "selector 'fct_nope' matches no model" in capsys.readouterr().err
    bad = tmp_path / "empty.py"
    bad.write_text("x = 1\n")
    assert cli.main(["plan", "--project", str(bad), *ARGS[3:]]) == 2
    assert "defines no backfill.Project" in capsys.readouterr().err
    assert cli.main([*ARGS, "--cost", "fct_daily_sales"]) == 2
    appends = tmp_path / "appends.py"
    appends.write_text(
        "import backfill\nproject = backfill.Project()\n"
        "project.model('events', grain='day', strategy='append')\n"
    )
    args = [
        "plan",
        "--project",
        str(appends),
        "--select",
        "events",
        "--start",
        "2026-01-01",
        "--end",
        "2026-01-02",
        "--as-of",
        "2026-02-01",
    ]
    assert cli.main(args) == 1  # an error finding
    assert "APPEND_STRATEGY" in capsys.readouterr().out
    assert cli.main([*args, "--allow-append"]) == 0


def test_console_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "backfill.cli", *ARGS, "--json", "--partitions-per-run", "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["task_count"] == 187
