"""A yearly dbt microbatch model downstream of a daily one, backfilled over a period inside a year
that has not ended (issue 19): the plan has the batch of the running year that ``dbt run`` runs,
and the published tables equal what ``dbt run`` with the same arguments builds (the oracle)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import duckdb
import pytest

import backfill
from dbt_support import dbt, query

UTC = dt.timezone.utc
# The case (25 Mar .. 16 Apr) made short, as each day is a dbt batch: the days end by
# as_of, April and 2026 are in progress.
START, END, AS_OF = "2026-04-13", "2026-04-16", "2026-04-16"

PROJECT = """name: inprog
version: "1.0.0"
profile: inprog
config-version: 2
flags: {send_anonymous_usage_stats: false}
"""
PROFILE = """inprog:
  target: dev
  outputs:
    dev: {type: duckdb, path: warehouse.duckdb, schema: main, threads: 1}
"""
SOURCES = """version: 2
sources:
  - name: raw
    tables:
      - name: events
        config: {event_time: ts}
"""
# concurrent_batches=false: dbt 1.10 hung running concurrent batches in-process here.
DAILY = """{{{{ config(materialized="incremental", incremental_strategy="microbatch",
          event_time="day", begin="2026-01-01", batch_size="day", concurrent_batches=false) }}}}
select cast(ts as date) as day, sum(amount) * {factor} as revenue
from {{{{ source("raw", "events") }}}} group by 1
"""
YEARLY = """{{ config(materialized="incremental", incremental_strategy="microbatch",
          event_time="year_start", begin="2026-01-01", batch_size="year",
          concurrent_batches=false) }}
select cast(date_trunc('year', day) as date) as year_start, sum(revenue) as revenue,
       count(*) as days
from {{ ref("daily") }} group by 1
"""


def _write(root: Path, factor: int) -> None:
    (root / "models" / "daily.sql").write_text(DAILY.format(factor=factor))


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project built by dbt with the bug (revenue x1) for 10 .. 15 Apr 2026."""
    root = tmp_path_factory.mktemp("inprog") / "p"
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text(PROJECT)
    (root / "profiles.yml").write_text(PROFILE)
    (root / "models" / "sources.yml").write_text(SOURCES)
    (root / "models" / "yearly.sql").write_text(YEARLY)
    _write(root, 1)
    con = duckdb.connect(str(root / "warehouse.duckdb"))
    con.execute(
        "CREATE SCHEMA raw; CREATE TABLE raw.events AS SELECT i AS id, "
        "TIMESTAMP '2026-04-10 00:00:00' + to_minutes(i * 97) AS ts, "
        "(i % 13) + 1 AS amount FROM range(89) t(i)"
    )  # to 15 April
    con.close()
    dbt(root, "run", "--event-time-start", "2026-04-10", "--event-time-end", END)
    return root


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(
        src, dest, ignore=shutil.ignore_patterns(".backfill", ".test_profiles", "target")
    )
    return dest


def _table(root: Path, model: str) -> list[tuple[object, ...]]:
    return query(root, f"SELECT * FROM main.{model} ORDER BY 1")


def test_the_running_years_batch_is_planned_and_published_as_dbt_builds_it(
    published: Path, tmp_path: Path
) -> None:
    oracle = _copy(published, tmp_path / "oracle")
    _write(oracle, 2)
    res = dbt(
        oracle, "run", "--select", "daily+", "--event-time-start", START, "--event-time-end", END
    )
    ran = {
        r.node.name: [(a.astimezone(UTC), b.astimezone(UTC)) for a, b in r.batch_results.successful]
        for r in res.result.results
    }
    assert ran["yearly"] == [
        (dt.datetime(2026, 1, 1, tzinfo=UTC), dt.datetime(2027, 1, 1, tzinfo=UTC))
    ]  # dbt runs the running year

    root = _copy(published, tmp_path / "shop")
    before = _table(root, "yearly")
    _write(root, 2)
    p = backfill.Project.from_dbt(root)
    plan = p.plan("daily+", START, END, propagate="clip", as_of=AS_OF)
    planned: dict[str, list[tuple[dt.datetime, dt.datetime]]] = {}
    for t in map(plan.task, range(plan.task_count)):
        planned.setdefault(t["model"], []).append((t["start"], t["end"]))
    assert planned == ran  # exactly the batches dbt runs, the running year's included
    assert plan.include_in_progress and plan.ok and plan.stale == []
    assert [f.code for f in plan.findings if f.model == "yearly"] == ["IN_PROGRESS"]
    # without it, the year would be left stale -- and the plan says so
    left = p.plan("daily+", START, END, propagate="clip", as_of=AS_OF, include_in_progress=False)
    assert left.model("yearly").tasks == 0 and not left.ok
    assert "1 partition 2026 of yearly is still in progress" in left.stale[0].message

    bf = p.backfill(plan, reason="revenue doubled")
    assert bf.run(concurrency=2, backoff=0.0).ok
    assert bf.audit().passed
    bf.publish("revenue from 13 April doubled")
    assert _table(root, "daily") == _table(oracle, "daily")
    assert _table(root, "yearly") == _table(oracle, "yearly") != before
