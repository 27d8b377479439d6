"""Helpers shared by the tests that run the shop example end to end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb

import backfill

AS_OF = "2026-12-01"  # the shop's data ends 2026-11-30; plans never depend on today's date


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``backfill ARGS`` in a fresh interpreter, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "backfill.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def build(root: Path) -> None:
    """The initial build of every model, straight into the published tables."""
    p = backfill.Project.load(root)
    plan = p.plan("*", "2026-01-01", "2026-12-01", as_of=AS_OF, partitions_per_run=31)
    status = p.backfill(plan, reason="initial build", direct=True).run(concurrency=4)
    assert status.ok, str(status)


def query(root: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` against the project's warehouse, read-only."""
    c = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def copy_built(built: Path, dest: Path) -> Path:
    """A private copy of the built shop (warehouse and files), without its ledger."""
    shutil.copytree(built, dest)
    shutil.rmtree(dest / ".backfill")
    return dest
