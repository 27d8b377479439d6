"""A tiny project whose tasks take as long as the test says, for stopping runners and faults.

``daily`` sums ``raw.events`` per day; its WHERE clause also counts ``hash()``es over
``raw.knob`` x 1M rows, a condition that is always true: the knob's row count sets how long a
task computes (~35 ms a row on a loaded 2-core machine; 0 rows: instant) without changing the
result, and a running DuckDB statement stays interruptible. The test turns the knob between runs
(data, not SQL, so the model's SQL never changes between plan and run)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

import backfill
from backfill.engines.duckdb import audit_schema

START, AS_OF = "2026-01-01", "2026-03-01"

MODEL = """{{ config(event_time="day") }}
select cast(ts as date) as day, count(*) as n, sum(v) as total
from {{ source("raw", "events") }}
where ts >= {{ start }} and ts < {{ end }}
  and (select count(*) from {{ source("raw", "knob") }} k, range(1000000) t
       where hash(t.range + k.n) = 0) < 1000000000000
group by 1
"""


def make_project(root: Path, *, days: int, knob: int = 0, engine: str = "") -> Path:
    """The project at ``root`` with ``days`` days of hourly events; ``engine``: more engine
    settings (YAML flow mapping items, e.g. ``lock_timeout: 1``)."""
    (root / "models").mkdir(parents=True)
    extra = f", {engine}" if engine else ""
    (root / "backfill.yml").write_text(f"""name: slow
engine: {{type: duckdb, path: warehouse.duckdb, schema: main{extra}}}
state: .backfill
sources:
  raw:
    events: {{grain: day, tz: UTC, event_time: ts}}
    knob: {{}}
models:
  defaults: {{grain: day, tz: UTC, begin: "{START}", strategy: replace}}
  daily: {{}}
""")
    (root / "models" / "daily.sql").write_text(MODEL)
    c = duckdb.connect(str(root / "warehouse.duckdb"))
    c.execute("CREATE SCHEMA raw")
    c.execute(
        f"CREATE TABLE raw.events AS SELECT TIMESTAMP '{START}' + to_hours(i) AS ts, "
        f"i % 13 AS v FROM range(24 * {days}) r(i)"
    )
    c.close()
    set_knob(root, knob)
    return root


def set_knob(root: Path, rows: int) -> None:
    c = duckdb.connect(str(root / "warehouse.duckdb"))
    c.execute(f"CREATE OR REPLACE TABLE raw.knob AS SELECT range AS n FROM range({rows})")
    c.close()


def new_backfill(root: Path, days: int, ledger: str | None = None) -> backfill.Backfill:
    p = backfill.Project.load(root)
    stop = (dt.date.fromisoformat(START) + dt.timedelta(days=days)).isoformat()
    plan = p.plan("daily", START, stop, as_of=AS_OF)
    led = None if ledger is None else backfill.open_ledger(ledger)
    return backfill.Backfill.create(p, plan, reason="stop test", ledger=led)


def expected(root: Path) -> list[tuple[Any, ...]]:
    """The oracle: DuckDB's own per-day sums of the raw events."""
    return rows(
        root, "SELECT cast(ts AS date), count(*), sum(v) FROM raw.events GROUP BY 1 ORDER BY 1"
    )


def written(root: Path, backfill_id: str) -> list[tuple[Any, ...]]:
    """What the backfill wrote to its audit area (every row, so a doubled day shows twice)."""
    return rows(root, f"SELECT day, n, total FROM {audit_schema(backfill_id)}.daily ORDER BY 1")


def rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    c = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        return c.execute(sql).fetchall()
    except duckdb.CatalogException:  # the audit table was never created
        return []
    finally:
        c.close()


def run_cli(*args: str) -> subprocess.Popen[str]:
    """``backfill ARGS`` started in a fresh interpreter (its output piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "backfill.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for(what: Callable[[], bool], timeout: float = 60.0, proc: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"the process ended ({proc.returncode}) first: {proc.communicate()}"
            )
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def running(bf: backfill.Backfill) -> int:
    return sum(t.status == "running" for t in bf.tasks())
