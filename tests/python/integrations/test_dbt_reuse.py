"""The dbt engine's shortcuts keep results identical: one parsed manifest per backfill (parsed
again when a project file changes), and the audit copy of a group of batches in one transaction
(equal, task by task, to copying each batch alone)."""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import shutil
from pathlib import Path

import duckdb
import pytest

import backfill
from backfill.engines.duckdb import DuckDBEngine
from backfill.examples import dbt_shop
from backfill.integrations.dbt.profile import GENERATED_TARGET, read_profile, write_profile
from backfill.integrations.dbt.reuse import ManifestCache
from dbt_support import AS_OF

DAY = dt.timedelta(days=1)


def test_a_backfill_parses_once_and_again_after_an_edit(
    built_dbt_shop: Path, tmp_path: Path
) -> None:
    root = tmp_path / "shop"
    shutil.copytree(
        built_dbt_shop, root, ignore=shutil.ignore_patterns(".backfill", ".test_profiles")
    )
    dbt_shop.fix(root)
    p = backfill.Project.from_dbt(root)
    plan = p.plan("fct_daily_sales", "2026-08-01", "2026-08-04", propagate="clip", as_of=AS_OF)
    bf = p.backfill(plan, reason="reuse")
    assert bf.run(concurrency=1, backoff=0.0).ok
    engine = bf.engine
    # the 3 ready days are handed over together even at c=1: one invocation (2 if a thread
    # came late)
    assert engine.invocations <= 2  # type: ignore[attr-defined]
    assert engine.manifests.parses == 1  # type: ignore[attr-defined]

    cache = ManifestCache(root, GENERATED_TARGET)
    profiles = write_profile(read_profile(root), tmp_path / "profiles", schema="main")
    first = cache.get(profiles, tmp_path / "target")
    assert cache.get(profiles, tmp_path / "target") is first and cache.parses == 1
    model = root / "models" / "marts" / "fct_daily_sales.sql"
    model.write_text(model.read_text().replace("group by 1", "group by 1\n-- edited"))
    again = cache.get(profiles, tmp_path / "target")
    assert again is not first and cache.parses == 2
    assert again is not None
    assert "-- edited" in again.nodes["model.dbt_shop.fct_daily_sales"].raw_code


def _table(
    con: duckdb.DuckDBPyConnection,
    name: str,
    rows: list[tuple[dt.date, int, str]],
) -> None:
    con.execute(f"CREATE TABLE {name} (d DATE, n INTEGER, s VARCHAR)")
    if rows:
        con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?)", rows)


@pytest.mark.parametrize("seed", range(6))
def test_a_group_copy_equals_copying_each_batch_alone(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    first = dt.date(2026, 8, 1)

    def rows(n: int) -> list[tuple[dt.date, int, str]]:
        return [
            (first + rnd.randrange(12) * DAY, rnd.randrange(5), rnd.choice("abc")) for _ in range(n)
        ]

    warehouse = DuckDBEngine(tmp_path / "w.duckdb", keep_open=True)
    held = contextlib.ExitStack()  # the test's own cursor on the engine's file
    con = held.enter_context(warehouse.connect())
    _table(con, "work", rows(rnd.randrange(0, 60)))
    old = rows(rnd.randrange(0, 40))
    _table(con, "grouped", old)
    _table(con, "alone", old)
    start = first + rnd.randrange(4) * DAY
    utc = dt.time(tzinfo=dt.timezone.utc)
    periods = [
        (dt.datetime.combine(start + i * DAY, utc), dt.datetime.combine(start + (i + 1) * DAY, utc))
        for i in range(rnd.randrange(2, 7))
    ]
    grouped = warehouse.copy_periods(("main", "grouped"), ("main", "work"), "d", periods)
    alone = [
        warehouse.copy_periods(("main", "alone"), ("main", "work"), "d", [p])[0] for p in periods
    ]
    assert grouped == alone
    in_place = warehouse.copy_periods(("main", "grouped"), ("main", "grouped"), "d", periods)
    assert [fp for _, fp in in_place] == [fp for _, fp in grouped]
    table = "SELECT * FROM {} ORDER BY ALL"
    assert (
        con.execute(table.format("grouped")).fetchall()
        == con.execute(table.format("alone")).fetchall()
    )
    for (deleted, fp), (s, e) in zip(grouped, periods, strict=True):
        assert deleted == sum(1 for r in old if s.date() <= r[0] < e.date())
        assert (
            fp.rows
            == con.execute(
                "SELECT count(*) FROM work WHERE d >= ? AND d < ?", [s.date(), e.date()]
            ).fetchone()[0]
        )  # type: ignore[index]
