"""A Plan is complete when made: what the planner knew (costs, batching, the retention checks of
the sources it replays) arrives in its PlanContext, and nothing changes it afterwards."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

import backfill
from backfill.plan import ModelCost, PlanContext, PlanFinding, RetentionCheck
from plan_helpers import UTC, shop

AS_OF = dt.datetime(2026, 11, 1, tzinfo=UTC)


class _Check:
    """A retention check as a source kind returns it (the Kafka one needs a broker)."""

    def __init__(self, model: str, start: dt.datetime, end: dt.datetime) -> None:
        self.model, self.start, self.end = model, start, end
        self.findings = [PlanFinding("RETENTION", "error", model, f"lost {start:%Y-%m-%d}")]

    def __str__(self) -> str:
        return f"replay into {self.model}: [{self.start:%Y-%m-%d}, {self.end:%Y-%m-%d})"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "start": self.start.isoformat()}


class _Landing:
    """A landing source (backfill.model.landing.LandingSource) whose check records its calls."""

    source = "kafka.orders"
    lands_in = "raw_orders"
    time_column = "at"
    changelog_names = ("kafka.orders",)

    def __init__(self) -> None:
        self.calls: list[tuple[str, dt.datetime, dt.datetime, dt.datetime | None]] = []

    def check_retention(
        self, model: str, start: dt.datetime, end: dt.datetime, *, now: dt.datetime | None
    ) -> _Check:
        self.calls.append((model, start, end, now))
        return _Check(model, start, end)

    def read_period(self, model: str, start: dt.datetime, end: dt.datetime) -> Any:
        raise AssertionError("planning reads no records")


def _landing_project() -> tuple[backfill.Project, _Landing]:
    landing = _Landing()
    p = backfill.Project()
    p.source("kafka.orders", grain="hour", event_time="at", kind="kafka")
    p.model(
        "raw_orders",
        grain="day",
        depends_on=["kafka.orders"],
        event_time="at",
        meta={"landing": landing},
    )
    p.model("daily", grain="day", depends_on=["raw_orders"], event_time="at")
    return p, landing


def test_the_planner_checks_retention_before_it_makes_the_plan() -> None:
    p, landing = _landing_project()
    plan = p.plan("raw_orders+", "2026-10-01", "2026-10-05", as_of=AS_OF)
    # One check, over the period the landing model's tasks cover, at the plan's as_of.
    start, end = dt.datetime(2026, 10, 1, tzinfo=UTC), dt.datetime(2026, 10, 5, tzinfo=UTC)
    assert landing.calls == [("raw_orders", start, end, AS_OF)]
    (check,) = plan.replay
    assert isinstance(check, _Check)
    assert [f.code for f in plan.findings] == ["RETENTION"] and not plan.ok
    assert [f.code for f in plan.errors(include_checks=False)] == ["RETENTION"]
    assert "replay into raw_orders: [2026-10-01, 2026-10-05)" in plan.describe()
    assert plan.to_dict()["replay"] == [{"model": "raw_orders", "start": start.isoformat()}]
    # A plan that rebuilds no landing model checks nothing.
    assert p.plan("daily", "2026-10-01", "2026-10-05", as_of=AS_OF).replay == []
    assert len(landing.calls) == 1


def test_a_rescheduled_plan_keeps_the_context() -> None:
    p, _ = _landing_project()
    plan = p.plan("raw_orders+", "2026-10-01", "2026-10-05", as_of=AS_OF, min_task_seconds=3)
    again = plan.estimate(costs={"raw_orders": 5.0}, concurrency=2).plan
    assert again.batching == plan.batching == "auto"
    assert again.costs == plan.costs
    assert again.to_dict()["min_task_seconds"] == 3.0
    assert [str(c) for c in again.replay] == [str(c) for c in plan.replay]
    assert again.findings == plan.findings


def test_a_plan_cannot_be_changed_after_it_is_made() -> None:
    plan = shop().plan("fct_daily_sales+", "2026-08-01", "2026-10-29", as_of=AS_OF)
    assert not hasattr(plan, "attach_costs") and not hasattr(plan, "attach_replay")
    for name in ("select", "exclude", "project"):
        with pytest.raises(AttributeError):
            setattr(plan, name, None)
    # The lists it hands out are copies.
    plan.replay.append(_Check("x", AS_OF, AS_OF))
    plan.costs.clear()
    assert plan.replay == [] and set(plan.costs) == {m.model for m in plan.models}


def test_the_context_copies_what_it_is_given() -> None:
    costs = {"m": ModelCost("m", "given", per_partition=2.0)}
    checks: list[RetentionCheck] = [_Check("m", AS_OF, AS_OF)]
    ctx = PlanContext(batching=3, min_task_seconds=None, costs=costs, replay=checks)
    costs.clear()
    checks.clear()
    assert set(ctx.costs) == {"m"} and len(ctx.replay) == 1
    assert [f.code for f in ctx.replay_findings] == ["RETENTION"]
    with pytest.raises(TypeError):
        ctx.costs["n"] = ModelCost("n", "none")  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.batching = 1  # type: ignore[misc]
