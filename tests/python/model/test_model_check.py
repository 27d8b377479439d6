"""Project.check and the plan: static model checks (strategy + lint) reported as plan findings."""

from __future__ import annotations

import pytest

import backfill

PERIOD = "where ordered_at >= {{ start }} and ordered_at < {{ end }}"


def shop_like(sql: str, strategy: str = "replace") -> backfill.Project:
    p = backfill.Project("t")
    p.source("raw.orders", grain="day", event_time="ordered_at")
    p.model(
        "clean_orders",
        depends_on=["raw.orders"],
        grain="day",
        event_time="ordered_at",
        strategy=strategy,
        sql=sql,
    )
    return p


def test_clock_read_in_a_planned_model_is_a_plan_error() -> None:
    p = shop_like("select *, now() as loaded_at from {{ source('raw', 'orders') }} " + PERIOD)
    checked = p.check("clean_orders")
    assert [f.code for f in checked] == ["CLOCK_READ"]
    plan = p.plan("clean_orders", "2026-08-01", "2026-08-03", as_of="2026-09-01")
    found = [f for f in plan.findings if f.code == "CLOCK_READ"]
    assert len(found) == 1 and found[0].model == "clean_orders" and found[0].severity == "error"
    assert "line 1, column 11" in found[0].message
    assert not plan.ok


def test_clean_model_and_suppression_keep_the_plan_ok() -> None:
    clean = shop_like("select * from {{ source('raw', 'orders') }} " + PERIOD)
    assert list(clean.check("clean_orders")) == []
    assert clean.plan("clean_orders", "2026-08-01", "2026-08-03", as_of="2026-09-01").ok
    waived = shop_like(
        "select *, now() as loaded_at -- backfill: ignore CLOCK_READ audit column\n"
        "from {{ source('raw', 'orders') }} " + PERIOD
    )
    assert list(waived.check("clean_orders")) == []
    assert [f.reason for f in waived.check("clean_orders").suppressed] == ["audit column"]


def test_unbounded_read_and_append_strategy() -> None:
    p = shop_like("select * from {{ source('raw', 'orders') }}", strategy="append")
    codes = [f.code for f in p.check("clean_orders")]
    assert codes == ["APPEND_STRATEGY", "UNBOUNDED_READ"]
    plan = p.plan("clean_orders", "2026-08-01", "2026-08-03", as_of="2026-09-01")
    # APPEND_STRATEGY comes once, from the planner (which knows allow_append).
    assert [f.code for f in plan.findings].count("APPEND_STRATEGY") == 1
    assert "UNBOUNDED_READ" in [f.code for f in plan.findings]


def test_check_of_an_unknown_model_names_it() -> None:
    with pytest.raises(backfill.NotFoundError, match="nope"):
        shop_like("select 1").check("nope")
