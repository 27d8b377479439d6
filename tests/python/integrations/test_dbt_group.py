"""Which waiting tasks the dbt engine runs in one invocation (integrations/dbt/group.py), and a
backfill of two independent models at concurrency 1 in one invocation that writes exactly what
``dbt run`` writes for the same selection and period."""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from pathlib import Path

import duckdb
import pytest

import backfill
from backfill.engines import Area
from backfill.examples import dbt_shop
from backfill.integrations.dbt.group import Pending, Request
from dbt_support import AS_OF, dbt

AREA = Area("g1")
D = dt.datetime(2026, 8, 1)
DAY = dt.timedelta(days=1)


@pytest.fixture(scope="module")
def shop(built_dbt_shop: Path) -> backfill.Project:
    return backfill.Project.from_dbt(built_dbt_shop)


def _days(model: str, first: int, last: int) -> list[Request]:
    return [Request(model, D + i * DAY, D + (i + 1) * DAY, AREA) for i in range(first, last)]


def _pending(*requests: Request) -> Pending:
    p = Pending()
    for r in requests:
        p.add(r)
    return p


def _names(group: list[Request]) -> list[tuple[str, int | None]]:
    return [(r.model, None if r.start is None else (r.start - D).days) for r in group]


def test_a_model_runs_with_independent_models_over_the_same_days(shop: backfill.Project) -> None:
    daily, region = _days("fct_daily_sales", 0, 4), _days("fct_region_orders", 0, 4)
    month = Request("fct_monthly_sales", D, D + 31 * DAY, AREA)
    table = Request("fct_sales_7d", None, None, AREA)
    waiting = _pending(*daily[::-1], month, *region, table)
    # the month and the 7-day table read fct_daily_sales: they wait for their own invocation
    group = waiting.take(shop, daily[2])
    assert _names(group) == [("fct_daily_sales", i) for i in range(4)] + [
        ("fct_region_orders", i) for i in range(4)
    ]
    assert len(waiting) == 2
    assert _names(waiting.take(shop, table)) == [("fct_sales_7d", None), ("fct_monthly_sales", 0)]
    assert len(waiting) == 0


def test_only_periods_that_join_and_the_same_range_share_an_invocation(
    shop: backfill.Project,
) -> None:
    daily = _days("fct_daily_sales", 0, 2) + _days("fct_daily_sales", 3, 5)  # 4 August missing
    region = _days("fct_region_orders", 0, 3)  # 3 days: not the daily run's range
    other = Request("fct_daily_sales", D, D + DAY, Area("g2"))  # another backfill's area
    waiting = _pending(*daily, *region, other)
    assert _names(waiting.take(shop, daily[1])) == [("fct_daily_sales", 0), ("fct_daily_sales", 1)]
    assert _names(waiting.take(shop, daily[2])) == [("fct_daily_sales", 3), ("fct_daily_sales", 4)]
    assert _names(waiting.take(shop, region[0])) == [("fct_region_orders", i) for i in range(3)]
    assert waiting.take(shop, other) == [other] and len(waiting) == 0


def _arrive_slowly(waiting: Pending, requests: list[Request], gap: float) -> threading.Thread:
    def arrive() -> None:
        for r in requests:
            time.sleep(gap)
            waiting.add(r)

    t = threading.Thread(target=arrive)
    t.start()
    return t


def test_gather_waits_for_every_announced_task_however_slowly_they_come(
    shop: backfill.Project,
) -> None:
    days = _days("fct_daily_sales", 0, 5)
    waiting = _pending(days[0])
    waiting.expect(4)  # the first is here; 4 more, 0.1 s apart (the timing pause is 0.03 s)
    t = _arrive_slowly(waiting, days[1:], 0.1)
    began = time.monotonic()
    waiting.gather(0.03)
    assert len(waiting) == 5 and time.monotonic() - began >= 0.35
    assert _names(waiting.take(shop, days[0])) == [("fct_daily_sales", i) for i in range(5)]
    t.join()
    # unannounced, the same slow arrivals are taken as they come (the timing heuristic)
    waiting = _pending(days[0])
    t = _arrive_slowly(waiting, days[1:], 0.1)
    waiting.gather(0.03)
    assert len(waiting) < 5
    t.join()


def test_an_announced_task_that_never_comes_holds_the_others_only_so_long(
    shop: backfill.Project, caplog: pytest.LogCaptureFixture
) -> None:
    days = _days("fct_daily_sales", 0, 2)
    waiting = Pending()
    waiting.expect(3)  # two come, one does not
    for r in days:
        waiting.add(r)
    began = time.monotonic()
    waiting.gather(0.03, announced=0.3)
    assert 0.3 <= time.monotonic() - began < 1.0
    assert "1 announced task(s) did not arrive within 0.3 s" in caplog.text
    assert len(waiting.take(shop, days[0])) == 2
    # and the next round starts afresh: nothing stale is waited for
    waiting.add(days[0])
    began = time.monotonic()
    waiting.gather(0.01, announced=5.0)
    assert time.monotonic() - began < 1.0


def _rows(root: Path, relation: str, where: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(root / "warehouse.duckdb"))
    try:
        return con.execute(f"SELECT * FROM {relation} WHERE {where} ORDER BY ALL").fetchall()
    finally:
        con.close()


def test_two_models_at_concurrency_1_in_one_invocation_write_what_dbt_run_writes(
    built_dbt_shop: Path, tmp_path: Path
) -> None:
    ignore = shutil.ignore_patterns(".backfill", ".test_profiles")
    ours = shutil.copytree(built_dbt_shop, tmp_path / "ours", ignore=ignore)
    theirs = shutil.copytree(built_dbt_shop, tmp_path / "theirs", ignore=ignore)
    for root in (ours, theirs):
        dbt_shop.fix(root)
    select, start, end = "fct_daily_sales fct_region_orders", "2026-08-02", "2026-08-06"
    dbt(
        theirs,
        "run",
        "--select",
        *select.split(),
        "--event-time-start",
        start,
        "--event-time-end",
        end,
    )
    p = backfill.Project.from_dbt(ours)
    plan = p.plan(select, start, end, propagate="clip", as_of=AS_OF)
    assert plan.task_count == 8
    bf = p.backfill(plan, reason="group")
    assert bf.run(concurrency=1, backoff=0.0).ok
    # both models' 4 days in one dbt invocation (the runner announced all 8), each recorded
    assert bf.engine.invocations == 1  # type: ignore[attr-defined]
    assert [t.status for t in bf.tasks()] == ["done"] * 8
    assert sorted(a["task_id"] for a in bf.attempts()) == sorted(t.task_id for t in bf.tasks())
    for model, column in (("fct_daily_sales", "sales_date"), ("fct_region_orders", "order_date")):
        where = f"{column} >= DATE '{start}' AND {column} < DATE '{end}'"
        expected = _rows(theirs, f"main.{model}", where)
        assert expected and _rows(ours, f'"audit_{bf.id}".{model}', "TRUE") == expected
