"""The planner: partition sets, mappings, propagation, exact task dependencies, schedule, output.

The straightforward Python planner in benchmarks/plan_reference.py (networkx + datetime) is the
oracle for random graphs; small plans are checked literally.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import backfill
from plan_helpers import UTC, core_tasks, reference_tasks, shop

GRAINS = ["hour", "day", "week", "month", "quarter", "year"]
AUG1 = dt.datetime(2026, 8, 1, tzinfo=UTC)
OCT29 = dt.datetime(2026, 10, 29, tzinfo=UTC)
AS_OF = dt.datetime(2026, 11, 30, tzinfo=UTC)


def d(y: int, m: int, day: int, h: int = 0) -> dt.datetime:
    return dt.datetime(y, m, day, h, tzinfo=UTC)


def tasks_of(plan: backfill.Plan, model: str) -> list[dict[str, Any]]:
    return [t for t in map(plan.task, range(plan.task_count)) if t["model"] == model]


def overlapping(parents: list[dict[str, Any]], lo: dt.datetime, hi: dt.datetime) -> list[int]:
    return [t["task_id"] for t in parents if t["start"] < hi and t["end"] > lo]


# -- the shop --------------------------------------------------------------------------------


def test_shop_daily_sales_plus_gives_89_3_95() -> None:
    plan = shop().plan(
        "fct_daily_sales+", "2026-08-01", "2026-10-29", as_of=AS_OF, partitions_per_run=1
    )
    counts = {m.model: (m.partitions, m.tasks, m.first, m.last) for m in plan.models}
    assert counts == {
        "fct_daily_sales": (89, 89, "2026-08-01", "2026-10-28"),
        "fct_monthly_sales": (3, 3, "2026-08", "2026-10"),
        "fct_sales_7d": (95, 95, "2026-08-01", "2026-11-03"),  # windows touching changed days
    }
    assert plan.task_count == 187 and plan.ok and plan.findings == []
    daily = {t["label"]: t["task_id"] for t in tasks_of(plan, "fct_daily_sales")}
    monthly = {t["label"]: t for t in tasks_of(plan, "fct_monthly_sales")}
    rolling = {t["label"]: t for t in tasks_of(plan, "fct_sales_7d")}
    # Not a whole-model barrier: each task waits for exactly the partitions it reads.
    assert monthly["2026-08"]["depends_on"] == [daily[f"2026-08-{i:02d}"] for i in range(1, 32)]
    assert monthly["2026-10"]["depends_on"] == [daily[f"2026-10-{i:02d}"] for i in range(1, 29)]
    assert rolling["2026-08-01"]["depends_on"] == [daily["2026-08-01"]]
    assert rolling["2026-08-02"]["depends_on"] == [daily["2026-08-01"], daily["2026-08-02"]]
    assert rolling["2026-08-10"]["depends_on"] == [daily[f"2026-08-{i:02d}"] for i in range(4, 11)]
    assert rolling["2026-11-03"]["depends_on"] == [daily["2026-10-28"]]
    assert all(plan.task(i)["depends_on"] == [] for i in daily.values())
    assert {t["wave"] for t in tasks_of(plan, "fct_daily_sales")} == {0}
    assert {t["wave"] for t in [*monthly.values(), *rolling.values()]} == {1}
    assert plan.wave_count == 2


def test_shop_matches_reference_for_every_run_length_and_mode() -> None:
    p = shop()
    for k in (1, 2, 5, 31):
        for mode in ("impact", "clip"):
            plan = p.plan(
                "clean_orders+ clean_order_items",
                AUG1,
                OCT29,
                as_of=AS_OF,
                partitions_per_run=k,
                propagate=mode,
            )  # type: ignore[arg-type]
            expected = reference_tasks(
                p,
                "clean_orders+ clean_order_items",
                AUG1,
                OCT29,
                AS_OF,
                partitions_per_run=k,
                propagate=mode,
            )
            assert core_tasks(plan) == expected, (k, mode)


def test_clip_keeps_the_period_and_reports_what_stays_stale() -> None:
    plan = shop().plan(
        "fct_daily_sales+", AUG1, OCT29, as_of=AS_OF, propagate="clip", partitions_per_run=1
    )
    assert [(m.model, m.partitions) for m in plan.models] == [
        ("fct_daily_sales", 89),
        ("fct_monthly_sales", 3),
        ("fct_sales_7d", 89),
    ]
    (f,) = plan.findings
    assert (f.code, f.severity, f.model) == ("CLIPPED_IMPACT", "warning", "fct_sales_7d")
    assert "6 partitions 2026-10-29..2026-11-03" in f.message and "propagate='impact'" in f.message
    assert plan.ok  # a warning is not an error


def test_as_of_drops_partitions_that_have_not_ended() -> None:
    plan = shop().plan(
        "fct_daily_sales+", AUG1, OCT29, as_of=d(2026, 10, 15, 12), partitions_per_run=1
    )
    got = {m.model: (m.partitions, m.last) for m in plan.models}
    assert got == {
        "fct_daily_sales": (75, "2026-10-14"),
        "fct_monthly_sales": (2, "2026-09"),
        "fct_sales_7d": (75, "2026-10-14"),
    }
    # 15 Oct and October are in progress at noon on 15 Oct: published so far, left stale;
    # 16..28 Oct have not started
    notes = {(f.model, f.code): f for f in plan.findings}
    assert {(m, c, f.severity) for (m, c), f in notes.items()} == {
        ("fct_daily_sales", "STALE_DOWNSTREAM", "warning"),
        ("fct_daily_sales", "NOT_ENDED", "info"),
        ("fct_monthly_sales", "STALE_DOWNSTREAM", "warning"),
        ("fct_sales_7d", "STALE_DOWNSTREAM", "warning"),
        ("fct_sales_7d", "NOT_ENDED", "info"),
    }
    assert (
        "1 partition 2026-10-15 of fct_daily_sales is still in progress"
        in notes["fct_daily_sales", "STALE_DOWNSTREAM"].message
    )
    assert "13 partitions 2026-10-16..2026-10-28" in notes["fct_daily_sales", "NOT_ENDED"].message
    assert not plan.ok and not plan.errors()


def test_as_of_defaults_to_now() -> None:
    before = dt.datetime.now(UTC).replace(microsecond=0)
    plan = shop().plan("fct_daily_sales", "2026-01-01", "2026-01-03", partitions_per_run=1)
    assert before <= plan.as_of <= dt.datetime.now(UTC)


# -- a small plan, checked literally -------------------------------------------------------


def small_project() -> backfill.Project:
    p = backfill.Project()
    p.source("raw", grain="day", event_time="at")
    p.model("a", grain="day", depends_on=["raw"], event_time="at")
    p.model("b", grain="day", depends_on=[backfill.window("a", -1, 0)], event_time="at")
    p.model("c", grain="month", depends_on=["b"], event_time="at")
    p.model("d", depends_on=["a", "c"])  # unpartitioned, strategy full
    return p


def test_small_plan_exact_tasks_and_dependencies() -> None:
    plan = small_project().plan(
        "a+", "2026-01-30", "2026-02-02", as_of="2026-03-01", partitions_per_run=1
    )
    rows = [
        (t["model"], t["label"], t["depends_on"], t["wave"])
        for t in map(plan.task, range(plan.task_count))
    ]
    assert rows == [
        ("a", "2026-01-30", [], 0),
        ("a", "2026-01-31", [], 0),
        ("a", "2026-02-01", [], 0),
        ("b", "2026-01-30", [0], 1),
        ("b", "2026-01-31", [0, 1], 1),
        ("b", "2026-02-01", [1, 2], 1),
        ("b", "2026-02-02", [2], 1),  # its window reads the changed 1 Feb
        ("c", "2026-01", [3, 4], 2),
        ("c", "2026-02", [5, 6], 2),
        ("d", "full", [0, 1, 2, 7, 8], 3),  # one task after everything it reads
    ]
    assert plan.task(9)["start"] is None and plan.task(9)["end"] is None
    assert [f.code for f in plan.findings] == ["FULL_REBUILD"]


def test_small_plan_runs_of_two_partitions() -> None:
    plan = small_project().plan(
        "a+", "2026-01-30", "2026-02-02", as_of="2026-03-01", partitions_per_run=2
    )
    rows = [
        (t["model"], t["label"], t["partitions"], t["depends_on"])
        for t in map(plan.task, range(plan.task_count))
    ]
    assert rows == [
        ("a", "2026-01-30", 2, []),
        ("a", "2026-02-01", 1, []),
        ("b", "2026-01-30", 2, [0]),
        ("b", "2026-02-01", 2, [0, 1]),
        ("c", "2026-01", 2, [2, 3]),  # Jan and Feb in one run
        ("d", "full", 1, [0, 1, 4]),
    ]


# -- mappings --------------------------------------------------------------------------------


@pytest.mark.parametrize("parent_grain", GRAINS)
@pytest.mark.parametrize("child_grain", GRAINS)
def test_overlap_between_every_grain_pair(parent_grain: str, child_grain: str) -> None:
    p = backfill.Project()
    p.model("parent", grain=parent_grain)
    p.model("child", grain=child_grain, depends_on=["parent"])
    start, end, as_of = d(2026, 2, 10, 5), d(2026, 3, 3), d(2028, 1, 1)
    plan = p.plan("parent+", start, end, as_of=as_of, partitions_per_run=1)
    assert core_tasks(plan) == reference_tasks(p, "parent+", start, end, as_of)
    parents = tasks_of(plan, "parent")
    assert parents[0]["start"] <= start and parents[-1]["end"] >= end
    for t in tasks_of(plan, "child"):
        # Exactly the parent tasks overlapping the child's partition.
        assert t["depends_on"] == overlapping(parents, t["start"], t["end"])
        assert t["depends_on"], t  # impact: every child partition touches a changed one


@pytest.mark.parametrize(
    ("tz", "parent_grain", "child_grain", "year"),
    [
        ("Europe/Berlin", "hour", "day", 2026),  # the fall-back on 25 Oct
        ("America/Sao_Paulo", "hour", "day", 2018),  # midnight skipped on 4 Nov 2018
        ("America/Sao_Paulo", "day", "week", 2018),
        ("Asia/Kolkata", "hour", "hour", 2026),  # half-hour offset
        ("Australia/Lord_Howe", "hour", "day", 2026),
        ("Europe/Berlin", "day", "month", 2026),
    ],
)
def test_overlap_in_other_time_zones(
    tz: str, parent_grain: str, child_grain: str, year: int
) -> None:
    p = backfill.Project()
    p.model("parent", grain=parent_grain)  # UTC
    p.model("child", grain=child_grain, tz=tz, depends_on=["parent"])
    start, end = d(year, 10, 20), d(year, 11, 7)
    plan = p.plan("parent+", start, end, as_of=d(year + 1, 1, 1), partitions_per_run=1)
    children = tasks_of(plan, "child")
    parents = tasks_of(plan, "parent")
    expected = backfill.PeriodSet([(start, end)]).partitions(child_grain, tz=tz)
    if parent_grain == "hour" and child_grain == "day":
        assert [t["label"] for t in children][: len(expected)] == [x.label for x in expected]
    for t in children:
        assert t["depends_on"] == overlapping(parents, t["start"], t["end"])
        assert t["end"] - t["start"] == dt.timedelta(
            seconds=backfill.partition_of(t["start"], child_grain, tz).length_seconds
        )
    if tz == "Europe/Berlin" and child_grain == "day":
        fallback = next(t for t in children if t["label"] == "2026-10-25")
        assert len(fallback["depends_on"]) == 25  # the day with 25 hours
    if tz == "America/Sao_Paulo" and child_grain == "day":
        spring = next(t for t in children if t["label"] == "2018-11-04")
        assert len(spring["depends_on"]) == 23 and spring["start"] == d(2018, 11, 4, 3)


def test_window_reads_and_impact() -> None:
    p = backfill.Project()
    p.model("daily", grain="day")
    p.model("lead_lag", grain="day", depends_on=[backfill.window("daily", -2, 3)])
    p.model("monthly_3m", grain="month", depends_on=[backfill.window("daily", -2, 0)])
    plan = p.plan("daily+", "2026-05-10", "2026-05-12", as_of="2026-12-01", partitions_per_run=1)
    by = {m.model: (m.first, m.last) for m in plan.models}
    # days c with [c-2, c+3] touching 10..11 May: 7..13 May; months m whose 3-month window
    # (m-2..m) holds May: May..Jul.
    assert by == {
        "daily": ("2026-05-10", "2026-05-11"),
        "lead_lag": ("2026-05-07", "2026-05-13"),
        "monthly_3m": ("2026-05", "2026-07"),
    }
    lead = {t["label"]: t["depends_on"] for t in tasks_of(plan, "lead_lag")}
    assert lead == {
        "2026-05-07": [0],
        "2026-05-08": [0, 1],
        "2026-05-09": [0, 1],
        "2026-05-10": [0, 1],
        "2026-05-11": [0, 1],
        "2026-05-12": [0, 1],
        "2026-05-13": [1],
    }
    assert [t["depends_on"] for t in tasks_of(plan, "monthly_3m")] == [[0, 1]] * 3


def test_all_mapping_rebuilds_the_whole_history_from_begin() -> None:
    p = backfill.Project()
    p.model("rates", grain="month")
    p.model("orders_eur", grain="day", begin="2026-06-01", depends_on=[backfill.all_of("rates")])
    plan = p.plan(
        "rates+", "2026-08-01", "2026-09-01", as_of="2026-07-01T00:00:00Z", partitions_per_run=1
    )
    # rates Aug has not ended by 1 Jul: nothing changes, nothing to do downstream.
    assert [m.tasks for m in plan.models] == [0, 0]
    plan = p.plan(
        "rates+", "2026-03-01", "2026-04-01", as_of="2026-07-01T00:00:00Z", partitions_per_run=1
    )
    eur = plan.model("orders_eur")
    assert (eur.partitions, eur.first, eur.last) == (30, "2026-06-01", "2026-06-30")
    assert all(t["depends_on"] == [0] for t in tasks_of(plan, "orders_eur"))


def test_all_mapping_without_begin_warns() -> None:
    p = backfill.Project()
    p.model("dim", sql="select 1")  # unpartitioned
    p.model("fct", grain="day", depends_on=["dim"])
    plan = p.plan("dim+", "2026-03-01", "2026-03-03", as_of="2026-03-10", partitions_per_run=1)
    assert [(m.model, m.first, m.last) for m in plan.models] == [
        ("dim", "full", "full"),
        ("fct", "2026-03-01", "2026-03-09"),
    ]
    codes = {(f.code, f.model) for f in plan.findings}
    assert ("CLIPPED_IMPACT", "fct") in codes and ("FULL_REBUILD", "dim") in codes
    assert all(t["depends_on"] == [0] for t in tasks_of(plan, "fct"))


def test_unpartitioned_parent_and_child_chain() -> None:
    p = backfill.Project()
    p.model("dim", sql="select 1")
    p.model("agg", depends_on=["dim"])
    p.model("view", depends_on=["agg"], strategy="view")
    plan = p.plan("dim+", "2026-03-01", "2026-03-02", as_of="2026-04-01", partitions_per_run=1)
    assert [(t["model"], t["depends_on"]) for t in map(plan.task, range(3))] == [
        ("dim", []),
        ("agg", [0]),
        ("view", [1]),
    ]
    assert [f.message for f in plan.findings][
        -1
    ] == "view is a view: recreated once, after its inputs"


def test_not_selected_middle_model_breaks_the_chain() -> None:
    p = small_project()
    plan = p.plan("a c", "2026-01-30", "2026-02-02", as_of="2026-03-01", partitions_per_run=1)
    # b is not rebuilt, so c neither waits for a nor grows through b's window.
    assert [(t["model"], t["depends_on"]) for t in map(plan.task, range(plan.task_count))] == [
        ("a", []),
        ("a", []),
        ("a", []),
        ("c", []),
        ("c", []),
    ]
    stale = [f for f in plan.findings if f.code == "STALE_DOWNSTREAM"]
    assert [(f.model, f.severity) for f in stale] == [("b", "warning"), ("d", "warning")]
    assert "select 'a+'" in stale[0].message


# -- random graphs against the reference planner ---------------------------------------------


@st.composite
def random_projects(draw: st.DrawFn) -> tuple[backfill.Project, str, dict[str, Any]]:
    p = backfill.Project()
    names: list[str] = []
    for i in range(draw(st.integers(0, 2))):
        name = f"src{i}"
        p.source(name, grain=draw(st.sampled_from([None, "day", "hour"])))
        names.append(name)
    for i in range(draw(st.integers(1, 6))):
        name = f"m{i}"
        grain = draw(
            st.sampled_from(
                [None, "hour", "day", "day", "day", "week", "month", "month", "quarter", "year"]
            )
        )
        deps: list[str | backfill.Dependency] = []
        for parent in (
            draw(st.lists(st.sampled_from(names), unique=True, min_size=1, max_size=3))
            if names
            else []
        ):
            kind = draw(st.sampled_from(["overlap", "overlap", "window", "all"]))
            if kind == "window" and grain is not None:
                a = draw(st.integers(-3, 2))
                deps.append(backfill.window(parent, a, a + draw(st.integers(0, 3))))
            elif kind == "all":
                deps.append(backfill.all_of(parent))
            else:
                deps.append(parent)
        begin = None
        if grain is not None and draw(st.booleans()):
            begin = d(
                draw(st.sampled_from([2025, 2026])),
                draw(st.integers(1, 6)),
                draw(st.integers(1, 28)),
            )
        p.model(name, grain=grain, depends_on=deps, begin=begin)
        names.append(name)
    models = list(p.models)
    roots = [m + "+" for m in models if not p.models[m].depends_on] or [models[0] + "+"]
    select = (
        draw(st.sampled_from(["m*", "m*", " ".join(roots)]))
        if draw(st.booleans())
        else " ".join(draw(st.lists(st.sampled_from([*models, *roots]), min_size=1, max_size=3)))
    )
    start = d(2026, draw(st.integers(1, 8)), draw(st.integers(1, 28)), draw(st.integers(0, 23)))
    end = start + dt.timedelta(hours=draw(st.integers(1, 24 * 40)))
    as_of = end + dt.timedelta(hours=draw(st.integers(-24 * 5, 24 * 500)))
    kwargs = {
        "start": start,
        "end": end,
        "as_of": as_of,
        "propagate": draw(st.sampled_from(["impact", "clip"])),
        "partitions_per_run": draw(st.integers(1, 4)),
    }
    return p, select, kwargs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_projects())
def test_random_graphs_match_the_reference_planner(
    case: tuple[backfill.Project, str, dict[str, Any]],
) -> None:
    p, select, kw = case
    plan = p.plan(
        select,
        kw["start"],
        kw["end"],
        as_of=kw["as_of"],
        propagate=kw["propagate"],
        partitions_per_run=kw["partitions_per_run"],
    )
    expected = reference_tasks(
        p,
        select,
        kw["start"],
        kw["end"],
        kw["as_of"],
        propagate=kw["propagate"],
        partitions_per_run=kw["partitions_per_run"],
    )
    assert core_tasks(plan) == expected
    n = plan.task_count
    event(f"tasks: {'0' if not n else '<10' if n < 10 else '<100' if n < 100 else '100+'}")
    event(f"dependencies: {'none' if not plan.dependency_count else 'some'}")
    if plan.task_count <= 150:
        check_schedule(plan)


# -- schedule ----------------------------------------------------------------------------------


def check_schedule(plan: backfill.Plan) -> None:
    """Dependencies respected, never more than `concurrency` at once, and work-conserving: a
    ready task only waits while every slot is busy."""
    tasks = [plan.task(i) for i in range(plan.task_count)]
    conc = plan.schedule.concurrency
    events = sorted({t["sched_start"] for t in tasks})
    for t in tasks:
        ready = max((tasks[x]["sched_end"] for x in t["depends_on"]), default=0.0)
        assert t["sched_start"] >= ready - 1e-9
        for e in [ready, *(x for x in events if ready <= x < t["sched_start"])]:
            if e >= t["sched_start"]:
                break
            busy = sum(1 for u in tasks if u["sched_start"] <= e < u["sched_end"])
            assert busy == conc, (t, e)
    for e in events:
        assert sum(1 for u in tasks if u["sched_start"] <= e < u["sched_end"]) <= conc


def test_estimate_with_costs() -> None:
    plan = shop().plan(
        "fct_daily_sales+", AUG1, OCT29, as_of=AS_OF, concurrency=10, partitions_per_run=1
    )
    costs = {"fct_daily_sales": 240.0, "fct_monthly_sales": 60.0, "fct_sales_7d": 30.0}
    est = plan.estimate(costs=costs)
    assert est.total_work == 89 * 240 + 3 * 60 + 95 * 30
    assert est.per_model == {
        "fct_daily_sales": 89 * 240,
        "fct_monthly_sales": 180,
        "fct_sales_7d": 95 * 30,
    }
    assert est.assumed == [] and est.concurrency == 10
    # Lower bounds: the work spread over 10 slots, and the critical path.
    assert est.makespan >= est.total_work / 10
    assert est.critical_path[-1][0] in ("fct_monthly_sales", "fct_sales_7d")
    assert est.critical_path[0][0] == "fct_daily_sales"
    # Graham's bound for list scheduling: work / slots + (1 - 1/slots) x critical path (300 s).
    assert est.makespan <= est.total_work / 10 + 0.9 * 300 + 1e-9
    check_schedule(est.plan)
    assert str(est) == "est. 41 m at 10 concurrent (6 h 46 m of work)"
    # Fewer slots can only be slower.
    assert plan.estimate(costs=costs, concurrency=2).makespan > est.makespan
    assert plan.estimate().assumed == ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]
    with pytest.raises(backfill.InvalidInputError, match="concurrency 0"):
        plan.estimate(concurrency=0)
    with pytest.raises(backfill.NotFoundError, match="'fct_nope'"):
        plan.estimate(costs={"fct_nope": 1})
    with pytest.raises(backfill.NotFoundError, match="not in this plan"):
        plan.model("clean_orders")


def test_costs_given_to_plan_and_schedule_columns() -> None:
    plan = shop().plan(
        "fct_daily_sales+",
        AUG1,
        OCT29,
        as_of=AS_OF,
        concurrency=1,
        costs={"fct_daily_sales": 10, "fct_monthly_sales": 1, "fct_sales_7d": 1},
        partitions_per_run=1,
    )
    # One slot: makespan is the total work.
    assert plan.schedule.makespan == plan.schedule.total_work == 89 * 10 + 3 + 95
    check_schedule(plan)


def test_critical_path_priority_beats_fifo() -> None:
    # A long chain behind one root and many short independent tasks: the chain's root runs first.
    p = backfill.Project()
    p.model("short", grain="day")
    p.model("long_root", grain="month")
    p.model("long_tail", grain="month", depends_on=["long_root"])
    plan = p.plan(
        "short long_root+",
        "2026-01-01",
        "2026-01-05",
        as_of="2026-03-01",
        concurrency=1,
        costs={"short": 1, "long_root": 10, "long_tail": 10},
        partitions_per_run=1,
    )
    first = min(map(plan.task, range(plan.task_count)), key=lambda t: t["sched_start"])
    assert first["model"] == "long_root"
    assert plan.schedule.makespan == 4 + 20


# -- findings ----------------------------------------------------------------------------------


def test_append_strategy_is_an_error_unless_allowed() -> None:
    p = shop()
    p.model("events", grain="day", depends_on=["raw.orders"], strategy="append", event_time="at")
    plan = p.plan("events", AUG1, OCT29, as_of=AS_OF, partitions_per_run=1)
    (f,) = plan.findings
    assert (f.code, f.severity, f.model) == ("APPEND_STRATEGY", "error", "events")
    assert "89 partitions" in f.message and "allow_append=True" in f.message
    assert not plan.ok
    allowed = p.plan("events", AUG1, OCT29, as_of=AS_OF, allow_append=True, partitions_per_run=1)
    assert [(f.code, f.severity) for f in allowed.findings] == [("APPEND_STRATEGY", "warning")]
    assert allowed.ok


def test_retention_of_sources() -> None:
    p = backfill.Project()
    p.source("kafka.orders", grain="hour", event_time="at", retention="7d", kind="kafka")
    p.source("raw.items", grain="day", event_time="at", retention="30d")
    p.model("orders", grain="day", depends_on=["kafka.orders"], event_time="at")
    p.model("items", grain="day", depends_on=["raw.items"], event_time="at")
    p.model("snapshot", depends_on=["raw.items"])  # unpartitioned: rebuilt whole
    as_of = d(2026, 11, 1)
    plan = p.plan("orders items", "2026-10-01", "2026-10-31", as_of=as_of, partitions_per_run=1)
    by = {f.model: f for f in plan.findings}
    assert {f.code for f in plan.findings} == {"RETENTION"} and not plan.ok
    # Kafka keeps 7 days: hours from 2026-10-25 on; days 1..24 October need older data.
    assert "24 partitions 2026-10-01..2026-10-24 of orders" in by["orders"].message
    assert "consumer group" in by["orders"].message and "last resort" in by["orders"].message
    assert "nothing before 2026-10-25T00:00:00Z" in by["orders"].message
    # raw.items keeps 30 days: from 2 October.
    assert "1 partition 2026-10-01 of items" in by["items"].message
    plan = p.plan("items", "2026-09-30", "2026-10-31", as_of=as_of, partitions_per_run=1)
    (f,) = plan.findings
    assert "2 partitions 2026-09-30..2026-10-01 of items" in f.message
    assert p.plan("orders", "2026-10-26", "2026-10-31", as_of=as_of, partitions_per_run=1).ok
    plan = p.plan("snapshot", "2026-10-26", "2026-10-31", as_of=as_of, partitions_per_run=1)
    assert [(f.code, f.severity) for f in plan.findings] == [
        ("FULL_REBUILD", "info"),
        ("RETENTION", "error"),
    ]
    assert "rebuilt whole from raw.items" in plan.findings[1].message


def test_stale_downstream_suggests_plus() -> None:
    plan = shop().plan("fct_daily_sales", AUG1, OCT29, as_of=AS_OF, partitions_per_run=1)
    stale = [(f.code, f.severity, f.model) for f in plan.findings]
    assert stale == [
        ("STALE_DOWNSTREAM", "warning", "fct_monthly_sales"),
        ("STALE_DOWNSTREAM", "warning", "fct_sales_7d"),
    ]
    assert "select 'fct_daily_sales+'" in plan.findings[0].message
    assert not plan.ok and not plan.errors()  # runnable, but it leaves published data stale


def test_before_begin_is_info() -> None:
    plan = shop().plan(
        "clean_orders", "2025-12-01", "2026-01-03", as_of=AS_OF, partitions_per_run=1
    )
    info = [f for f in plan.findings if f.code == "BEFORE_BEGIN"]
    assert len(info) == 1 and info[0].severity == "info"
    assert "begins at 2026-01-01: 31 partitions 2025-12-01..2025-12-31" in info[0].message
    assert plan.model("clean_orders").partitions == 2


def test_full_scan_input() -> None:
    p = backfill.Project()
    p.source("raw.customers", grain="day")  # partitioned, but no event_time
    p.model("fct", grain="day", depends_on=["raw.customers"], event_time="at")
    p.model("ok", grain="day", depends_on=[backfill.all_of("raw.customers")])
    plan = p.plan("fct ok", "2026-03-01", "2026-03-04", as_of="2026-04-01", partitions_per_run=1)
    (f,) = plan.findings
    assert (f.code, f.severity, f.model) == ("FULL_SCAN_INPUT", "warning", "fct")
    assert "each of its 3 runs scans all of raw.customers" in f.message


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"start": "2026-10-29", "end": "2026-08-01"},
            backfill.InvalidInputError,
            "is not before end",
        ),
        (
            {"start": "2026-08-01", "end": "2026-08-01"},
            backfill.InvalidInputError,
            "is not before end",
        ),
        ({"partitions_per_run": 0}, backfill.InvalidInputError, "partitions_per_run 0"),
        ({"partitions_per_run": "many"}, backfill.InvalidInputError, "partitions_per_run 'many'"),
        ({"min_task_seconds": -1}, backfill.InvalidInputError, "min_task_seconds -1"),
        ({"concurrency": -1}, backfill.InvalidInputError, "concurrency -1"),
        ({"propagate": "spread"}, backfill.InvalidInputError, "propagate 'spread'"),
        ({"costs": {"fct_nope": 1.0}}, backfill.NotFoundError, "'fct_nope'"),
        (
            {"costs": {"fct_daily_sales": -5}},
            backfill.InvalidInputError,
            "cost of 'fct_daily_sales'",
        ),
        ({"start": dt.datetime(2026, 8, 1)}, backfill.InvalidInputError, "naive datetime"),
        ({"start": "yesterday"}, backfill.InvalidInputError, "yesterday"),
    ],
)
def test_bad_plan_input(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    args: dict[str, Any] = {"start": "2026-08-01", "end": "2026-10-29", "as_of": AS_OF} | kwargs
    with pytest.raises(error, match=message):
        shop().plan("fct_daily_sales+", args.pop("start"), args.pop("end"), **args)


def test_dates_are_read_in_tz() -> None:
    p = backfill.Project()
    p.model("x", grain="hour")
    plan = p.plan(
        "x", "2026-08-01", "2026-08-02", tz="Europe/Berlin", as_of=AS_OF, partitions_per_run=1
    )
    assert plan.task(0)["start"] == d(2026, 7, 31, 22) and plan.task_count == 24


# -- output ------------------------------------------------------------------------------------


def test_tasks_arrow_table() -> None:
    pa = importlib.import_module("pyarrow")
    plan = small_project().plan(
        "a+", "2026-01-30", "2026-02-02", as_of="2026-03-01", partitions_per_run=1
    )
    table = pa.table(plan.tasks)
    assert table.schema.names == [
        "task_id",
        "model",
        "start",
        "end",
        "label",
        "partitions",
        "wave",
        "sched_start",
        "sched_end",
        "depends_on",
    ]
    assert table.schema.field("start").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("depends_on").type == pa.list_(pa.int64())
    assert table.column("model").to_pylist() == ["a"] * 3 + ["b"] * 4 + ["c"] * 2 + ["d"]
    assert table.column("depends_on").to_pylist() == [plan.task(i)["depends_on"] for i in range(10)]
    assert table.column("start").to_pylist()[:2] == [d(2026, 1, 30), d(2026, 1, 31)]
    assert table.column("start").null_count == 1  # the unpartitioned model
    df = plan.to_pandas()
    assert list(df["label"])[-3:] == ["2026-01", "2026-02", "full"]
    assert df["partitions"].sum() == 10


def test_displays() -> None:
    plan = shop().plan(
        "fct_daily_sales+",
        AUG1,
        OCT29,
        as_of=AS_OF,
        concurrency=10,
        costs={"fct_daily_sales": 240, "fct_monthly_sales": 60, "fct_sales_7d": 30},
        partitions_per_run=1,
    )
    assert str(plan) == "3 models, 187 tasks; est. 41 m at 10 concurrent; no issues"
    assert "fct_sales_7d       day              95       95" in plan.describe()
    data = json.loads(plan.to_json())
    assert [m["partitions"] for m in data["models"]] == [89, 3, 95]
    assert len(data["tasks"]) == 187 and data["tasks"][0]["start"] == "2026-08-01T00:00:00+00:00"
    assert "tasks" not in json.loads(plan.to_json(tasks=False))
    mermaid = plan.to_mermaid()
    assert mermaid.splitlines() == [
        "flowchart LR",
        '  m0["fct_daily_sales<br/>2026-08-01..2026-10-28<br/>89 partitions, 89 tasks"]',
        '  m1["fct_monthly_sales<br/>2026-08..2026-10<br/>3 partitions, 3 tasks"]',
        '  m2["fct_sales_7d<br/>2026-08-01..2026-11-03<br/>95 partitions, 95 tasks"]',
        "  m0 --> m1",
        "  m0 -->|window(-6, 0)| m2",
    ]
    html = plan._repr_html_()
    assert html is not None and "<svg" in html and html.count("<rect") == 3
    assert "<td>fct_sales_7d</td>" in html and "41 m" in html


def test_mermaid_per_task_and_stale_nodes() -> None:
    plan = small_project().plan(
        "a+", "2026-01-30", "2026-02-02", as_of="2026-03-01", partitions_per_run=1
    )
    lines = plan.to_mermaid().splitlines()
    assert '  t0["a<br/>2026-01-30"]' in lines and "  t8 --> t9" in lines
    assert sum("-->" in x for x in lines) == sum(len(plan.task(i)["depends_on"]) for i in range(10))
    stale = (
        shop()
        .plan("fct_daily_sales", AUG1, OCT29, as_of=AS_OF, partitions_per_run=1)
        .to_mermaid(per_task=False)
    )
    assert '  s0["fct_monthly_sales<br/>not selected: stale"]' in stale
    assert "  class s0,s1 stale" in stale


def test_html_is_none_for_huge_plans() -> None:
    p = backfill.Project()
    for i in range(201):
        p.model(f"m{i}", grain="day")
    assert (
        p.plan("m*", "2026-01-01", "2026-01-02", as_of=AS_OF, partitions_per_run=1)._repr_html_()
        is None
    )
