"""plan(propagate="clip") on a dbt project gives exactly the batches a real ``dbt run`` with
--event-time-start/--event-time-end runs, for hour, day, month and year models."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

import backfill
from dbt_support import AS_OF, dbt

GRAINS = ("hour", "day", "month", "year")
UTC = dt.timezone.utc

PROJECT = """name: batches
version: "1.0.0"
profile: batches
config-version: 2
flags: {send_anonymous_usage_stats: false}
"""
PROFILE = """batches:
  target: dev
  outputs:
    dev: {type: duckdb, path: events.duckdb, schema: main, threads: 1}
"""
SOURCES = """version: 2
sources:
  - name: raw
    tables:
      - name: events
        config: {event_time: ts}
"""
# concurrent_batches=false: dbt 1.10 hung running concurrent batches in-process here.
MODEL = """{{{{ config(materialized="incremental", incremental_strategy="microbatch",
          event_time="ts", begin="2026-01-01", batch_size="{grain}",
          concurrent_batches=false) }}}}
select id, ts from {{{{ source("raw", "events") }}}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("batches")
    (root / "dbt_project.yml").write_text(PROJECT)
    (root / "profiles.yml").write_text(PROFILE)
    (root / "models").mkdir()
    (root / "models" / "sources.yml").write_text(SOURCES)
    for grain in GRAINS:
        (root / "models" / f"m_{grain}.sql").write_text(MODEL.format(grain=grain))
    con = duckdb.connect(str(root / "events.duckdb"))
    con.execute(
        "CREATE SCHEMA raw; CREATE TABLE raw.events AS SELECT i AS id, "
        "TIMESTAMP '2025-12-31 20:00:00' + to_minutes(i * 37) AS ts FROM range(4000) t(i)"
    )
    con.close()
    return root


def _dbt_batches(
    root: Path, start: str, end: str
) -> dict[str, list[tuple[dt.datetime, dt.datetime]]]:
    res = dbt(
        root,
        "run",
        "--select",
        *(f"m_{g}" for g in GRAINS),
        "--event-time-start",
        start,
        "--event-time-end",
        end,
    )
    out = {}
    for r in res.result.results:
        assert not r.batch_results.failed
        out[r.node.name] = [
            (a.astimezone(UTC), b.astimezone(UTC)) for a, b in r.batch_results.successful
        ]
    return out


def _planned(
    p: backfill.Project, start: str, end: str
) -> dict[str, list[tuple[dt.datetime, dt.datetime]]]:
    plan = p.plan(" ".join(f"m_{g}" for g in GRAINS), start, end, propagate="clip", as_of=AS_OF)
    out: dict[str, list[tuple[dt.datetime, dt.datetime]]] = {}
    for i in range(plan.task_count):
        t = plan.task(i)
        out.setdefault(t["model"], []).append((t["start"], t["end"]))
    return out


@pytest.mark.parametrize(
    "start, end",
    [
        ("2026-03-14T05:30:00", "2026-03-15T07:10:00"),  # unaligned start and end
        ("2026-02-28T21:00:00", "2026-03-01T03:00:00"),  # aligned, across a month end
        ("2025-12-31T22:15:00", "2026-01-01T01:00:00"),  # across a year, before `begin`
        ("2026-01-31", "2026-02-01"),  # one day as dates
    ],
)
def test_clip_plans_the_batches_dbt_runs(project: Path, start: str, end: str) -> None:
    p = backfill.Project.from_dbt(project)
    ran = _dbt_batches(project, start, end)
    planned = _planned(p, start, end)
    assert set(ran) == {f"m_{g}" for g in GRAINS}
    for model, batches in ran.items():
        assert planned[model] == batches, model
    # sanity of the oracle itself: dbt truncates the start and ceils the end per batch size
    first = dt.datetime.fromisoformat(start).replace(tzinfo=UTC)
    assert ran["m_year"][0][0] == first.replace(month=1, day=1, hour=0, minute=0)
    assert ran["m_hour"][0][0] == first.replace(minute=0)


def test_impact_adds_what_clip_leaves_stale(project: Path) -> None:
    p = backfill.Project.from_dbt(project)
    # one selected model: the others read the same source, not it, so nothing is stale
    clip = p.plan(
        "m_day", "2026-03-14T05:30:00", "2026-03-14T07:00:00", propagate="clip", as_of=AS_OF
    )
    assert clip.task_count == 1 and clip.task(0)["label"] == "2026-03-14"
