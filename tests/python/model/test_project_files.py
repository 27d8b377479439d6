"""The project format: backfill.yml + models/*.sql, loaded into a Project, with clear errors."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import backfill
from backfill.examples import shop
from backfill.model.rendering import render, sql_literal

REPO = Path(__file__).resolve().parents[3]
SHOP = REPO / "examples" / "shop"


def _python_shop() -> backfill.Project:
    spec = importlib.util.spec_from_file_location("shop_project", SHOP / "project.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_project()  # type: ignore[no-any-return]


def test_shop_files_give_the_same_graph_as_the_python_shop() -> None:
    loaded = backfill.Project.load(SHOP)
    built = _python_shop()
    assert loaded.name == "shop"
    assert loaded.topological_order(include_sources=True) == built.topological_order(
        include_sources=True
    )
    assert set(loaded.sources) == set(built.sources)
    for name, model in built.models.items():
        got = loaded.models[name]
        assert sorted(loaded.parents(name)) == sorted(built.parents(name)), name
        assert (got.grain, got.tz, got.begin, got.strategy, got.event_time) == (
            model.grain,
            model.tz,
            model.begin,
            model.strategy,
            model.event_time,
        ), name
        assert set(got.tags) == set(model.tags), name
    plan_a = loaded.plan(
        "fct_daily_sales+", "2026-08-01", "2026-10-29", as_of="2026-12-01", partitions_per_run=1
    )
    plan_b = built.plan(
        "fct_daily_sales+", "2026-08-01", "2026-10-29", as_of="2026-12-01", partitions_per_run=1
    )
    assert plan_a.task_count == plan_b.task_count == 89 + 95 + 3
    assert [m.periods for m in plan_a.models] == [m.periods for m in plan_b.models]


def test_settings_are_resolved_against_the_project_directory() -> None:
    p = backfill.Project.load(SHOP / "backfill.yml")
    assert p.settings is not None
    assert p.settings.engine.path == SHOP.resolve() / "warehouse.duckdb"
    assert p.settings.state_dir == SHOP.resolve() / ".backfill"
    assert p.settings.files["fct_sales_7d"].name == "fct_sales_7d.sql"
    assert p.settings.audits["fct_daily_sales"][0]["measure"] == "revenue"
    assert p.models["fct_monthly_sales"].grain == "month"  # file config beats yml defaults


def test_render_gives_utc_literals_and_resolves_refs() -> None:
    start = dt.datetime(2026, 8, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert sql_literal(start) == "TIMESTAMP '2026-07-31 22:00:00'"
    sql = render(
        "select * from {{ ref('a') }}, {{ source('raw', 'b') }} "
        "where t >= {{ start }} and t < {{ end }} -- {{ this }}",
        start=start,
        end=start + dt.timedelta(days=1),
        ref=lambda n, **_: f"R.{n}",
        source=lambda s, t: f"S.{s}.{t}",
        this="T",
    )
    assert sql == (
        "select * from R.a, S.raw.b where t >= TIMESTAMP '2026-07-31 22:00:00' and "
        "t < TIMESTAMP '2026-08-01 22:00:00' -- T"
    )


# -- bad project files -----------------------------------------------------------------------------
def _project(tmp_path: Path, **overrides: str) -> Path:
    root = tmp_path / "proj"
    shop.create(root, data=False)
    for name, text in overrides.items():
        target = root / "backfill.yml" if name == "yml" else root / "models" / f"{name}.sql"
        target.write_text(text)
    return root


CASES = {
    "unknown ref": (
        {
            "fct_monthly_sales": "{{ config(grain='month', event_time='m') }}\n"
            "select * from {{ ref('fct_daily_sale') }}"
        },
        [
            "fct_monthly_sales.sql",
            "'fct_monthly_sales'",
            "fct_daily_sale",
            "did you mean 'fct_daily_sales'",
        ],
    ),
    "cycle": (
        {
            "clean_orders": "{{ config(event_time='ordered_at') }}\n"
            "select * from {{ ref('fct_daily_sales') }}"
        },
        ["cycle", "clean_orders", "fct_daily_sales.sql"],
    ),
    "invalid grain": (
        {"fct_sales_7d": "{{ config(grain='fortnight', event_time='sales_date') }}\nselect 1"},
        ["fct_sales_7d.sql", "'fct_sales_7d'", "fortnight"],
    ),
    "invalid strategy": (
        {"fct_sales_7d": "{{ config(strategy='upsert', event_time='d') }}\nselect 1"},
        ["fct_sales_7d.sql", "'fct_sales_7d'", "upsert", "replace"],
    ),
    "unknown config key": (
        {"fct_sales_7d": "{{ config(event_tme='d') }}\nselect 1"},
        ["fct_sales_7d.sql", "event_tme", "did you mean 'event_time'"],
    ),
    "sql syntax error": (
        {"fct_daily_sales": "{{ config(event_time='sales_date') }}\nselect sum(x from t"},
        ["fct_daily_sales.sql", "'fct_daily_sales'", "SQL error"],
    ),
    "not a select": (
        {"fct_daily_sales": "{{ config(event_time='sales_date') }}\ndelete from t"},
        ["fct_daily_sales.sql", "one SELECT"],
    ),
    "template error": (
        {"fct_daily_sales": "{{ config(event_time='sales_date') }}\nselect {{ stat }}"},
        ["fct_daily_sales.sql", "'fct_daily_sales'", "stat"],
    ),
    "template syntax": (
        {"fct_daily_sales": "select {{ ref('clean_orders') }"},
        ["fct_daily_sales.sql", "line 1"],
    ),
    "bad window": (
        {
            "fct_sales_7d": "{{ config(event_time='d') }}\nselect * from {{ ref('fct_daily_sales', "
            "window=[0, -6]) }}"
        },
        ["fct_sales_7d.sql", "start 0 is after end -6"],
    ),
    "unknown source": (
        {
            "clean_orders": "{{ config(event_time='t') }}\n"
            "select * from {{ source('raw', 'order') }}"
        },
        ["clean_orders.sql", "raw.order", "not declared"],
    ),
    "missing event_time": ({"fct_sales_7d": "select 1 as x"}, ["fct_sales_7d.sql", "event_time"]),
    "yml key": (
        {"yml": "name: shop\nengines: {type: duckdb}\n"},
        ["backfill.yml", "engines", "did you mean 'engine'"],
    ),
    "yml engine setting": (
        {"yml": "name: shop\nengine: {type: duckdb, lock_timeot: 5}\n"},
        ["backfill.yml", "lock_timeot", "lock_timeout"],
    ),
    "yml engine value": (
        {"yml": "name: shop\nengine: {type: duckdb, lock_timeout: soon}\n"},
        ["backfill.yml", "lock_timeout", "soon", "number"],
    ),
    "yml engine": (
        {"yml": "name: shop\nengine: {type: snowflake}\n"},
        ["backfill.yml", "snowflake", "duckdb"],
    ),
    # a landing source's key is its installed kind (the kafka integration's entry point)
    "yml source key": (
        {"yml": "name: shop\nsources: {raw: {orders: {grain: day, kafak: {topic: o}}}}\n"},
        ["backfill.yml", "raw.orders", "kafak", "did you mean 'kafka'"],
    ),
    "yml lands_in of a warehouse source": (
        {"yml": "name: shop\nsources: {raw: {orders: {grain: day, lands_in: raw_orders}}}\n"},
        ["backfill.yml", "raw.orders", "lands_in is for landing sources (kafka: ...)"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_project_files_name_file_and_model_and_write_nothing(tmp_path: Path, case: str) -> None:
    overrides, fragments = CASES[case]
    root = _project(tmp_path, **overrides)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    with pytest.raises(backfill.ProjectError) as info:
        backfill.Project.load(root)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    # The CLI refuses with exit 2 and the same message, and writes nothing either.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill.cli",
            "run",
            "--project",
            str(root),
            "--select",
            "fct_daily_sales+",
            "--start",
            "2026-08-01",
            "--end",
            "2026-08-03",
            "--reason",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert fragments[0] in proc.stderr
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert not (root / ".backfill").exists() and not (root / "warehouse.duckdb").exists()


def test_a_project_needs_its_file(tmp_path: Path) -> None:
    with pytest.raises(backfill.ProjectError, match="no project file"):
        backfill.Project.load(tmp_path)


def test_disabled_model_and_yml_precedence(tmp_path: Path) -> None:
    root = _project(tmp_path)
    yml = (root / "backfill.yml").read_text()
    yml = yml.replace(
        "fct_sales_7d: {tags: [finance, daily]}",
        "fct_sales_7d: {tags: [finance, daily], enabled: false}",
    )
    yml = yml.replace(
        "clean_orders: {tags: [clean, daily]}",
        "clean_orders: {tags: [clean, daily], tz: Europe/Berlin}",
    )
    (root / "backfill.yml").write_text(yml)
    p = backfill.Project.load(root)
    assert "fct_sales_7d" not in p.models
    assert p.models["clean_orders"].tz == "Europe/Berlin"


def test_examples_dir_is_the_packaged_project() -> None:
    for rel in ("backfill.yml", "models/fct_daily_sales.sql", "fixes/fct_daily_sales.sql"):
        assert (SHOP / rel).read_bytes() == (shop.PROJECT_DIR / rel).read_bytes()


def test_plan_cli_reads_a_project_directory() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill.cli",
            "plan",
            "--project",
            str(SHOP),
            "--select",
            "fct_daily_sales+",
            "--start",
            "2026-08-01",
            "--end",
            "2026-10-29",
            "--as-of",
            "2026-12-01",
            "--json",
            "--partitions-per-run",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["task_count"] == 187
    assert [m["model"] for m in doc["models"]] == [
        "fct_daily_sales",
        "fct_monthly_sales",
        "fct_sales_7d",
    ]


def test_shop_module_writes_project_and_data(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill.examples.shop",
            "--dir",
            str(tmp_path / "s"),
            "--orders-per-day",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    p = backfill.Project.load(tmp_path / "s")
    assert sorted(p.models) == sorted(backfill.Project.load(SHOP).models)
    assert (tmp_path / "s" / "warehouse.duckdb").is_file()
    with pytest.raises(FileExistsError):
        shop.create(tmp_path / "s")
