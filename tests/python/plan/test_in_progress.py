"""Partitions still in progress at as_of, overlapping backfills and SQL changed between plan and
run (issue 19, correctness). The dbt half of in-progress periods is in test_dbt_in_progress.py."""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from pathlib import Path

import pytest

import backfill
from backfill._stamps import who
from backfill.examples import shop
from backfill.run.ledger import OverlapError
from shop_support import AS_OF, cli, copy_built

UTC = dt.timezone.utc
PERIOD = ("2026-03-25", "2026-04-16")  # the period; as_of its end: April, 2026 running


def calendar_project() -> backfill.Project:
    p = backfill.Project("cal")
    p.source("raw", grain="day", event_time="at")
    p.model("daily", grain="day", depends_on=["raw"], event_time="at", sql="select 1")
    p.model("monthly", grain="month", depends_on=["daily"], event_time="at", sql="select 1")
    p.model("yearly", grain="year", depends_on=["daily"], event_time="at", sql="select 1")
    return p


def stale(plan: backfill.Plan) -> dict[str, str]:
    return {f.model: f.message for f in plan.findings if f.code == "STALE_DOWNSTREAM"}


@pytest.mark.parametrize("propagate", ["clip", "impact"])
def test_a_partition_in_progress_left_out_is_a_stale_warning(propagate: str) -> None:
    plan = calendar_project().plan("daily+", *PERIOD, as_of="2026-04-16", propagate=propagate)  # type: ignore[arg-type]
    assert [(m.model, m.first, m.last) for m in plan.models] == [
        ("daily", "2026-03-25", "2026-04-15"),
        ("monthly", "2026-03", "2026-03"),
        ("yearly", None, None),
    ]
    found = stale(plan)
    assert set(found) == {"monthly", "yearly"}
    assert found["yearly"].startswith(
        "1 partition 2026 of yearly is still in progress at as_of 2026-04-16T00:00:00Z"
    )
    assert "regular schedule re-runs it" in found["yearly"]
    assert "--include-in-progress" in found["monthly"] and "2026-04" in found["monthly"]
    assert all(f.severity == "warning" for f in plan.stale)
    assert not plan.ok and plan.errors() == []  # not ok, yet runnable
    assert "2 warnings, 2 models left stale" in str(plan)
    assert plan.to_dict()["ok"] is False and plan.to_dict()["include_in_progress"] is False


def test_include_in_progress_rebuilds_them_with_an_info() -> None:
    plan = calendar_project().plan(
        "daily+",
        *PERIOD,
        as_of="2026-04-16",
        propagate="clip",
        include_in_progress=True,
        partitions_per_run=1,
    )
    rows = [
        (t["model"], t["label"], t["start"], t["end"])
        for t in map(plan.task, range(plan.task_count))
        if t["model"] != "daily"
    ]
    assert rows == [
        (
            "monthly",
            "2026-03",
            dt.datetime(2026, 3, 1, tzinfo=UTC),
            dt.datetime(2026, 4, 1, tzinfo=UTC),
        ),
        (
            "monthly",
            "2026-04",
            dt.datetime(2026, 4, 1, tzinfo=UTC),
            dt.datetime(2026, 5, 1, tzinfo=UTC),
        ),
        (
            "yearly",
            "2026",
            dt.datetime(2026, 1, 1, tzinfo=UTC),
            dt.datetime(2027, 1, 1, tzinfo=UTC),
        ),
    ]
    yearly = next(t for t in map(plan.task, range(plan.task_count)) if t["model"] == "yearly")
    assert len(yearly["depends_on"]) == 22  # every rebuilt day of 2026
    assert plan.stale == [] and plan.ok and str(plan).endswith("no issues")
    infos = {f.model: f for f in plan.findings if f.code == "IN_PROGRESS"}
    assert set(infos) == {"monthly", "yearly"} and infos["yearly"].severity == "info"
    assert plan.include_in_progress


def test_a_period_reaching_today_leaves_today_stale_and_a_boundary_as_of_has_none() -> None:
    p = calendar_project()
    plan = p.plan("daily", "2026-04-14", "2026-04-17", as_of="2026-04-16T12:00:00Z")
    assert plan.model("daily").last == "2026-04-15"
    assert "1 partition 2026-04-16 of daily is still in progress" in stale(plan)["daily"]
    # as_of on midnight: 16 April has not started, so nothing of it was published
    plan = p.plan("daily", "2026-04-14", "2026-04-17", as_of="2026-04-16")
    assert "daily" not in stale(plan)
    assert [f.code for f in plan.findings if f.model == "daily"] == ["NOT_ENDED"]
    # a month boundary: April ended, the year runs on
    plan = p.plan("daily+", "2026-04-29", "2026-05-01", as_of="2026-05-01", propagate="clip")
    assert plan.model("monthly").last == "2026-04" and set(stale(plan)) == {"yearly"}


def test_the_cli_says_so_and_includes_them_when_asked(tmp_path: Path) -> None:
    file = tmp_path / "cal.py"
    file.write_text(
        textwrap.dedent("""\
        import backfill
        def build_project():
            p = backfill.Project("cal")
            p.source("raw", grain="day", event_time="at")
            p.model("daily", grain="day", depends_on=["raw"], event_time="at")
            p.model("yearly", grain="year", depends_on=["daily"], event_time="at")
            return p
        """)
    )
    args = (
        "plan",
        "--project",
        str(file),
        "--select",
        "daily+",
        "--start",
        PERIOD[0],
        "--end",
        PERIOD[1],
        "--as-of",
        "2026-04-16",
        "--propagate",
        "clip",
    )
    out = cli(*args)
    assert out.returncode == 1, out.stderr  # not ok: a published partition is left stale
    assert "1 model left stale" in out.stdout
    assert "WARNING STALE_DOWNSTREAM [yearly]: 1 partition 2026 of yearly" in out.stdout
    out = cli(*args, "--include-in-progress", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["include_in_progress"] and doc["ok"]
    assert [m["periods"] for m in doc["models"] if m["model"] == "yearly"] == [
        [["2026-01-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"]]
    ]


# -- overlapping backfills and SQL changed between plan and run, on the shop -------------------
@pytest.fixture
def shop_dir(built_shop: Path, tmp_path: Path) -> Path:
    dest = copy_built(built_shop, tmp_path / "shop")
    shop.fix(dest)
    return dest


def test_an_overlapping_backfill_is_refused_until_a_reason_is_given(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    first = p.backfill(
        p.plan("fct_daily_sales+", "2026-08-01", "2026-08-05", as_of=AS_OF), reason="first"
    )
    second = p.plan("fct_daily_sales", "2026-08-03", "2026-08-08", as_of=AS_OF)
    with pytest.raises(OverlapError) as err:
        p.backfill(second, reason="second")
    text = str(err.value)
    assert (
        f"{first.id} (pending, by {who()}, 'first') writes fct_daily_sales "
        "2026-08-03..2026-08-04 (2 tasks)" in text
    )
    assert [b["id"] for b in first.ledger.backfills()] == [first.id]  # nothing recorded
    allowed = p.backfill(second, reason="second", allow_overlap="the race test")
    opts = allowed.ledger.backfill(allowed.id).options
    assert opts["allow_overlap"]["reason"] == "the race test"
    assert [o["backfill_id"] for o in opts["allow_overlap"]["overlaps"]] == [first.id]
    # the CLI refuses the same way (exit 2, nothing recorded), and records it with a reason
    run = (
        "run",
        "--project",
        str(shop_dir),
        "--select",
        "fct_daily_sales",
        "--start",
        "2026-08-04",
        "--end",
        "2026-08-05",
        "--reason",
        "third",
        "--as-of",
        AS_OF,
        "--json",
    )
    out = cli(*run)
    assert out.returncode == 2 and first.id in out.stderr and allowed.id in out.stderr
    assert len(first.ledger.backfills()) == 2
    assert cli(*run, "--allow-overlap", "checked with ana").returncode == 0
    # once the first is published, the same period is free again
    assert first.run(concurrency=2).ok
    first.audit()
    first.publish(note="first")
    assert [
        o.backfill_id
        for o in first.ledger.overlaps(
            p.name,
            [
                {
                    "model": "fct_monthly_sales",
                    "start": dt.datetime(2026, 8, 1, tzinfo=UTC),
                    "end": dt.datetime(2026, 9, 1, tzinfo=UTC),
                }
            ],
        )
    ] == []


def test_a_model_whose_sql_changed_since_planning_is_refused_naming_it(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("fct_daily_sales+", "2026-08-01", "2026-08-03", as_of=AS_OF),
        reason="discount bug fixed",
    )
    sql = shop_dir / "models" / "fct_monthly_sales.sql"
    planned = sql.read_text()
    sql.write_text(planned.replace("select", "select /* edited after planning */", 1))
    with pytest.raises(
        backfill.ConflictError, match="SQL of fct_monthly_sales changed since it was planned"
    ) as err:
        backfill.Backfill.resume(bf.id, project=shop_dir).run()
    assert "accept_changed_sql" in str(err.value) and f"backfill discard {bf.id}" in str(err.value)
    assert {t.status for t in bf.tasks()} == {"pending"}  # nothing ran
    out = cli("run", "--resume", bf.id, "--project", str(shop_dir), "--json")
    assert out.returncode == 2 and "fct_monthly_sales" in out.stderr
    # the planned SQL back: it runs
    sql.write_text(planned)
    assert backfill.Backfill.resume(bf.id, project=shop_dir).run(concurrency=2).ok


def test_an_accepted_sql_change_is_recorded_and_runs_the_rest(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("fct_daily_sales+", "2026-08-01", "2026-08-03", as_of=AS_OF),
        reason="discount bug fixed",
    )
    sql = shop_dir / "models" / "fct_monthly_sales.sql"
    sql.write_text(sql.read_text().replace("select", "select /* a fix */", 1))
    out = cli(
        "run",
        "--resume",
        bf.id,
        "--project",
        str(shop_dir),
        "--json",
        "--accept-changed-sql",
        "comment only",
    )
    assert out.returncode == 0, out.stderr
    opts = bf.ledger.backfill(bf.id).options
    assert opts["accepted_sql_reasons"][0]["models"] == ["fct_monthly_sales"]
    assert opts["accepted_sql_reasons"][0]["reason"] == "comment only"
    assert backfill.Backfill.resume(bf.id, project=shop_dir).changed_sql() == []
