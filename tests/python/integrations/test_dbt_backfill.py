"""A backfill through dbt with write-audit-publish: the published tables end up equal to what a
plain ``dbt run`` of the fixed project builds; failed batches are recorded per task and resumed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import backfill
from backfill.examples import dbt_shop
from dbt_support import AS_OF, FIRST, LAST, MODELS, build, dbt, fingerprints, query
from shop_support import cli

PERIOD = ("2026-08-01", "2026-08-21")  # the bug's whole span in the small shop
BACKFILLED = ("fct_daily_sales", "fct_monthly_sales", "fct_sales_7d")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, int]]:
    """Fingerprints of the fixed project built from scratch by dbt."""
    root = dbt_shop.create(
        tmp_path_factory.mktemp("ref") / "p", orders_per_day=12, first=FIRST, last=LAST
    )
    dbt_shop.fix(root)
    build(root)
    return fingerprints(root)


def _copy(built: Path, dest: Path) -> Path:
    shutil.copytree(built, dest, ignore=shutil.ignore_patterns(".backfill", ".test_profiles"))
    return dest


def _schemas(root: Path) -> list[str]:
    return [
        r[0]
        for r in query(
            root,
            "SELECT schema_name FROM duckdb_schemas() WHERE schema_name LIKE 'audit_%' ORDER BY 1",
        )
    ]


def test_backfill_through_dbt_publishes_what_dbt_builds(
    built_dbt_shop: Path, tmp_path: Path, reference: dict[str, tuple[int, int]]
) -> None:
    root = _copy(built_dbt_shop, tmp_path / "shop")
    before = fingerprints(root)
    assert before["fct_daily_sales"] != reference["fct_daily_sales"]  # the bug is published
    dbt_shop.fix(root)
    p = backfill.Project.from_dbt(root)
    plan = p.plan("fct_daily_sales+", *PERIOD, propagate="clip", as_of=AS_OF)
    assert [(m.model, m.tasks) for m in plan.models] == [
        ("fct_daily_sales", 20),
        ("fct_sales_7d", 1),
        ("fct_monthly_sales", 1),
    ]
    bf = p.backfill(plan, reason="discount bug fixed")
    status = bf.run(concurrency=4, backoff=0.0)
    assert status.ok, str(status)
    engine = bf.engine
    assert type(engine).__name__ == "DbtEngine"
    # the runner hands over every ready task: the 20 days in one dbt invocation, then the month
    # and the 7-day table (neither reads the other) together; 3 if a thread came late
    assert 2 <= engine.invocations <= 3, engine.invocations  # type: ignore[attr-defined]
    # nothing published yet: the backfill wrote into its audit area only
    assert fingerprints(root) == before
    assert f"audit_{bf.id}" in _schemas(root)
    new_rows = query(root, f'SELECT count(*) FROM "audit_{bf.id}".fct_daily_sales')[0][0]
    assert new_rows == 20  # only the backfilled days, not the seeded copy of the rest
    report = bf.audit()
    assert report.passed
    daily = report["fct_daily_sales"]
    assert len(daily.differing) == 20
    pub = bf.publish("revenue from 1 August about 2% lower")
    assert sorted(pub.models) == sorted(BACKFILLED)
    assert fingerprints(root) == reference  # every table equals dbt's build of the fixed project
    assert _schemas(root) == []  # audit and dbt work schemas dropped
    assert p.changelog().publications()[0]["backfill_id"] == bf.id


def test_a_dbt_view_downstream_is_published_as_a_view(built_dbt_shop: Path, tmp_path: Path) -> None:
    root = _copy(built_dbt_shop, tmp_path / "shop")
    (root / "models" / "marts" / "fct_big_days.sql").write_text(
        "{{ config(materialized='view') }}\n"
        "select sales_date, revenue from {{ ref('fct_daily_sales') }} where orders >= 3\n"
    )
    dbt(root, "run", "--select", "fct_big_days")
    dbt_shop.fix(root)
    p = backfill.Project.from_dbt(root)
    plan = p.plan("fct_daily_sales+", *PERIOD, propagate="clip", as_of=AS_OF)
    assert "fct_big_days" in [m.model for m in plan.models]
    bf = p.backfill(plan, reason="discount bug fixed")
    assert bf.run(concurrency=4, backoff=0.0).ok
    assert bf.audit().passed
    bf.publish("revenue from 1 August about 2% lower")
    view = "SELECT sales_date, revenue FROM main.fct_daily_sales WHERE orders >= 3 ORDER BY 1"
    assert query(
        root,
        "SELECT table_type FROM information_schema.tables WHERE table_schema = "
        "'main' AND table_name = 'fct_big_days'",
    ) == [("VIEW",)]
    assert query(root, "SELECT * FROM main.fct_big_days ORDER BY 1") == query(root, view)
    assert _schemas(root) == []


def test_failed_batches_are_recorded_per_task_and_resumed(
    built_dbt_shop: Path, tmp_path: Path, reference: dict[str, tuple[int, int]]
) -> None:
    root = _copy(built_dbt_shop, tmp_path / "shop")
    model = dbt_shop.fix(root)
    fixed = model.read_text()
    # 5 August fails on every attempt (DuckDB's error() raises for that day's rows)
    model.write_text(
        fixed.replace(
            "where o.status = 'completed'",
            "where o.status = 'completed'\n  and (cast(o.ordered_at as date) <> date '2026-08-05' "
            "or error('boom on 5 August') is null)",
        )
    )
    p = backfill.Project.from_dbt(root)
    plan = p.plan("fct_daily_sales+", "2026-08-01", "2026-08-09", propagate="clip", as_of=AS_OF)
    bf = p.backfill(plan, reason="discount bug fixed")
    status = bf.run(concurrency=4, max_attempts=2, backoff=0.0)
    assert not status.ok and status.status == "failed"
    assert [(t.model, t.label, t.attempts) for t in status.failed_tasks] == [
        ("fct_daily_sales", "2026-08-05", 2)
    ]
    assert "boom on 5 August" in str(status.failed_tasks[0].error)
    by_model = {m.model: m for m in status.models}
    assert by_model["fct_daily_sales"].done == 7
    assert by_model["fct_monthly_sales"].blocked == 1 and by_model["fct_sales_7d"].blocked == 1
    # fix the model and resume: only what is not done runs
    model.write_text(fixed)
    with pytest.raises(backfill.ConflictError, match="SQL of fct_daily_sales changed"):
        backfill.Backfill.resume(bf.id, project=backfill.Project.from_dbt(root))
    resumed = backfill.Backfill.resume(
        bf.id,
        project=backfill.Project.from_dbt(root),
        accept_changed_sql="the 5 August bug is fixed",
    )
    final = resumed.run(concurrency=4, backoff=0.0)
    assert final.ok, str(final)
    daily_ids = {t.task_id: t.label for t in resumed.tasks() if t.model == "fct_daily_sales"}
    attempts = [daily_ids[a["task_id"]] for a in resumed.attempts() if a["task_id"] in daily_ids]
    assert len(attempts) == 7 + 3  # 7 days once; 5 August failed twice, then ran once more
    assert attempts.count("2026-08-05") == 3
    assert resumed.audit().passed
    resumed.publish("fixed")
    # the backfilled days now hold the fixed numbers, 9 August on still the bug's
    fixed_days = query(
        root,
        "SELECT count(*) FROM main.fct_daily_sales WHERE sales_date "
        "BETWEEN '2026-08-01' AND '2026-08-08'",
    )[0][0]
    assert fixed_days == 8
    assert fingerprints(root)["fct_region_orders"] == reference["fct_region_orders"]


def test_cli_plan_and_run_with_dbt(built_dbt_shop: Path, tmp_path: Path) -> None:
    root = _copy(built_dbt_shop, tmp_path / "shop")
    dbt_shop.fix(root)
    r = cli(
        "plan",
        "--dbt",
        str(root),
        "--select",
        "fct_daily_sales+",
        "--start",
        "2026-08-14",
        "--end",
        "2026-08-16",
        "--propagate",
        "clip",
        "--as-of",
        AS_OF,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(m["model"], m["first"], m["last"]) for m in doc["models"]] == [
        ("fct_daily_sales", "2026-08-14", "2026-08-15"),
        ("fct_sales_7d", "full", "full"),
        ("fct_monthly_sales", "2026-08", "2026-08"),
    ]
    r = cli(
        "run",
        "--dbt",
        str(root),
        "--select",
        "fct_daily_sales",
        "--start",
        "2026-08-14",
        "--end",
        "2026-08-16",
        "--as-of",
        AS_OF,
        "--reason",
        "fix",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks"] == {"total": 2, "done": 2}
    r = cli(
        "plan",
        "--dbt",
        str(tmp_path / "nowhere"),
        "--select",
        "x",
        "--start",
        "2026-08-01",
        "--end",
        "2026-08-02",
    )
    assert r.returncode == 2 and "not a dbt project" in r.stderr
    assert MODELS  # the helper's list is the project's models


def test_direct_backfill_writes_the_published_tables_through_dbt(
    built_dbt_shop: Path, tmp_path: Path, reference: dict[str, tuple[int, int]]
) -> None:
    root = _copy(built_dbt_shop, tmp_path / "shop")
    dbt_shop.fix(root)
    p = backfill.Project.from_dbt(root)
    plan = p.plan("fct_daily_sales+", *PERIOD, propagate="clip", as_of=AS_OF, partitions_per_run=7)
    assert plan.model("fct_daily_sales").tasks == 3  # a task of 7 days is one dbt invocation
    status = p.backfill(plan, reason="initial fix", direct=True).run(concurrency=2)
    assert status.ok, str(status)
    got = fingerprints(root)
    assert {m: got[m] for m in BACKFILLED} == {m: reference[m] for m in BACKFILLED}
    assert _schemas(root) == []  # no audit area in a direct run
