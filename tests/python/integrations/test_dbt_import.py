"""Project.from_dbt: the manifest read (versions, staleness) and mapped to our model."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import backfill
from backfill.errors import NotFoundError
from backfill.examples import dbt_shop
from backfill.integrations.dbt import DbtError
from backfill.integrations.dbt.manifest import manifest_is_stale, parse_manifest
from backfill.integrations.dbt.mapping import project_from_manifest
from dbt_support import AS_OF


@pytest.fixture(scope="module")
def shop(built_dbt_shop: Path) -> backfill.Project:
    return backfill.Project.from_dbt(built_dbt_shop)


@pytest.fixture(scope="module")
def manifest_doc(shop: backfill.Project, built_dbt_shop: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((built_dbt_shop / "target" / "manifest.json").read_text())
    return doc


def test_models_sources_and_seeds_are_mapped(shop: backfill.Project) -> None:
    assert type(shop).__name__ == "DbtProject" and shop.name == "dbt_shop"
    assert set(shop.models) == {
        "clean_orders",
        "clean_order_items",
        "fct_daily_sales",
        "fct_monthly_sales",
        "fct_sales_7d",
        "fct_region_orders",
    }
    assert set(shop.sources) == {"raw.orders", "raw.order_items", "country_regions"}
    daily = shop.models["fct_daily_sales"]
    # microbatch -> partitioned by batch_size in UTC, replacing each batch
    assert (daily.grain, daily.tz, daily.strategy, daily.event_time) == (
        "day",
        "UTC",
        "replace",
        "sales_date",
    )
    assert daily.parents == ["clean_orders", "clean_order_items"]
    assert set(daily.tags) == {"finance", "daily"}  # dbt_project.yml +tags merged with config
    cfg = daily.meta["dbt"]
    assert cfg["incremental_strategy"] == "microbatch" and cfg["batch_size"] == "day"
    assert cfg["begin"] == "2026-01-01T00:00:00+00:00" and cfg["lookback"] == 1
    assert daily.begin is None  # dbt ignores begin when --event-time-start is given
    assert shop.models["fct_monthly_sales"].grain == "month"
    table = shop.models["fct_sales_7d"]
    assert (table.grain, table.strategy) == (None, "full")
    src = shop.sources["raw.orders"]
    assert src.event_time == "ordered_at" and src.kind == "raw"
    assert src.meta["dbt"]["loaded_at_field"] == "ordered_at"
    assert src.meta["dbt"]["freshness"]["warn_after"] == {"count": 1, "period": "day"}
    seed = shop.sources["country_regions"]
    assert seed.event_time is None and seed.meta["dbt"]["resource_type"] == "seed"
    # a parent without event_time is read whole by every batch
    region = shop.models["fct_region_orders"]
    assert [(d.parent, d.mapping) for d in region.depends_on] == [
        ("clean_orders", "overlap"),
        ("country_regions", "all"),
    ]
    assert shop.settings is not None and shop.settings.engine.type == "dbt"
    assert shop.settings.engine.path.name == "warehouse.duckdb"


def test_full_scan_input_and_lint_findings_in_the_plan(shop: backfill.Project) -> None:
    plan = shop.plan("clean_orders+", "2026-08-01", "2026-08-03", as_of=AS_OF)
    scans = [f for f in plan.findings if f.code == "FULL_SCAN_INPUT"]
    assert [(f.model, f.severity) for f in scans] == [("fct_region_orders", "warning")]
    assert "country_regions" in scans[0].message and "line 10, column 6" in scans[0].message
    check = shop.check("fct_region_orders")
    scan = next(f for f in check if f.code == "FULL_SCAN_INPUT")
    assert scan.path is not None and scan.path.endswith("models/marts/fct_region_orders.sql")
    # dbt filters ref()/source() of microbatch models: no UNBOUNDED_READ on the shop
    assert not [f for f in plan.findings if f.code == "UNBOUNDED_READ"]
    assert plan.ok


def _node(doc: dict[str, Any], name: str, raw_code: str, **config: Any) -> dict[str, Any]:
    base = copy.deepcopy(doc["nodes"]["model.dbt_shop.fct_sales_7d"])
    uid = f"model.dbt_shop.{name}"
    base.update(
        unique_id=uid,
        name=name,
        alias=name,
        raw_code=raw_code,
        original_file_path=f"models/{name}.sql",
        fqn=["dbt_shop", name],
    )
    base["config"] = {**base["config"], **config}
    return base


def _with(doc: dict[str, Any], *nodes: dict[str, Any]) -> backfill.Project:
    new = copy.deepcopy(doc)
    for n in nodes:
        new["nodes"][n["unique_id"]] = n
    return project_from_manifest(parse_manifest(new, Path("manifest.json")))


def test_strategies_map_to_findings(manifest_doc: dict[str, Any]) -> None:
    sql = "select * from {{ ref('fct_daily_sales') }}"
    p = _with(
        manifest_doc,
        _node(
            manifest_doc,
            "m_append",
            sql,
            materialized="incremental",
            incremental_strategy=None,
            unique_key=None,
        ),
        _node(
            manifest_doc,
            "m_merge",
            sql,
            materialized="incremental",
            incremental_strategy="merge",
            unique_key="sales_date",
        ),
        _node(manifest_doc, "m_view", sql, materialized="view"),
        _node(
            manifest_doc,
            "m_frozen",
            sql,
            materialized="incremental",
            incremental_strategy="merge",
            unique_key="sales_date",
            full_refresh=False,
        ),
    )
    assert p.models["m_append"].strategy == "append"  # dbt-duckdb's default without unique_key
    assert p.models["m_append"].meta["dbt"]["incremental_strategy"] == "append"
    assert (p.models["m_merge"].strategy, p.models["m_merge"].unique_key) == (
        "full",
        ("sales_date",),
    )
    assert p.models["m_view"].strategy == "view"
    plan = p.plan("m_append m_merge m_view m_frozen", "2026-08-01", "2026-08-02", as_of=AS_OF)
    errors = sorted((f.code, f.model) for f in plan.errors())
    # append doubles data when re-run; full_refresh=false stops dbt from rebuilding the past
    assert errors == [("APPEND_STRATEGY", "m_append"), ("FULL_REFRESH_DISABLED", "m_frozen")]
    assert not plan.ok


def test_clock_reads_in_model_sql_are_flagged(manifest_doc: dict[str, Any]) -> None:
    p = _with(
        manifest_doc,
        _node(
            manifest_doc,
            "m_clock",
            "{{ config(materialized='incremental', incremental_strategy='microbatch') }}\n"
            "select *, '{{ run_started_at }}' as loaded_at, now() as seen\n"
            "from {{ ref('fct_daily_sales') }}",
            materialized="incremental",
            incremental_strategy="microbatch",
            event_time="sales_date",
            batch_size="day",
            begin="2026-01-01T00:00:00",
        ),
    )
    found = [(f.code, f.line, f.text) for f in p.check("m_clock")]
    assert ("CLOCK_READ", 2, "run_started_at") in [(c, ln, t.strip("{} ")) for c, ln, t in found]
    assert any(c == "CLOCK_READ" and "now()" in t for c, _, t in found)
    plan = p.plan("m_clock", "2026-08-01", "2026-08-02", as_of=AS_OF)
    assert {f.code for f in plan.errors()} == {"CLOCK_READ"}


@pytest.mark.parametrize("version", [10, 11, 12])
def test_supported_manifest_versions(manifest_doc: dict[str, Any], version: int) -> None:
    doc = copy.deepcopy(manifest_doc)
    doc["metadata"]["dbt_schema_version"] = (
        f"https://schemas.getdbt.com/dbt/manifest/v{version}.json"
    )
    m = parse_manifest(doc, Path("m.json"))
    assert m.version == version and "fct_daily_sales" in m.models


@pytest.mark.parametrize(
    "url, expected",
    [
        ("https://schemas.getdbt.com/dbt/manifest/v13.json", "v13 (newer than"),
        ("https://schemas.getdbt.com/dbt/manifest/v9.json", "v9 is not supported"),
        ("https://schemas.getdbt.com/dbt/catalog/v1.json", "not a dbt manifest"),
    ],
)
def test_unknown_manifest_versions_are_refused(
    manifest_doc: dict[str, Any], url: str, expected: str
) -> None:
    doc = copy.deepcopy(manifest_doc)
    doc["metadata"]["dbt_schema_version"] = url
    with pytest.raises(DbtError) as info:
        parse_manifest(doc, Path("m.json"))
    assert expected in str(info.value)
    if "v1" in expected:
        assert "supported: v10, v11, v12" in str(info.value)


def test_a_manifest_file_imports_without_settings(
    built_dbt_shop: Path, shop: backfill.Project
) -> None:
    p = backfill.Project.from_dbt(built_dbt_shop / "target" / "manifest.json")
    assert set(p.models) == set(shop.models) and p.settings is None
    with pytest.raises(NotFoundError, match="not a dbt project"):
        backfill.Project.from_dbt(built_dbt_shop / "models")


def test_dbt_parse_runs_when_the_manifest_is_missing_or_stale(tmp_path: Path) -> None:
    root = dbt_shop.create(tmp_path / "p", data=False)
    manifest = root / "target" / "manifest.json"
    assert not manifest.exists() and manifest_is_stale(root, manifest)
    p = backfill.Project.from_dbt(root)  # dbt parse
    assert manifest.is_file() and not manifest_is_stale(root, manifest)
    assert "weekly" not in p.models["fct_monthly_sales"].tags
    built = manifest.stat().st_mtime
    backfill.Project.from_dbt(root)  # fresh: not parsed again
    assert manifest.stat().st_mtime == built
    model = root / "models" / "marts" / "fct_monthly_sales.sql"
    model.write_text(model.read_text().replace('tags=["monthly"]', 'tags=["monthly", "weekly"]'))
    later = time.time() + 2
    os.utime(model, (later, later))
    assert manifest_is_stale(root, manifest)
    p = backfill.Project.from_dbt(root)
    assert "weekly" in p.models["fct_monthly_sales"].tags
    # dbt parse does not touch the warehouse: no file appears in the project or elsewhere
    assert not (root / "warehouse.duckdb").exists()


def test_impact_rebuilds_what_dbt_would_leave_stale(manifest_doc: dict[str, Any]) -> None:
    # a daily model reading the monthly rollup: a changed day changes its whole month
    share = _node(
        manifest_doc,
        "fct_daily_share",
        "select * from {{ ref('fct_monthly_sales') }}",
        materialized="incremental",
        incremental_strategy="microbatch",
        event_time="sales_month",
        batch_size="day",
        begin="2026-01-01T00:00:00",
    )
    share["depends_on"]["nodes"] = ["model.dbt_shop.fct_monthly_sales"]
    p = _with(manifest_doc, share)
    args = ("fct_daily_sales+", "2026-08-14", "2026-08-16")
    clip = p.plan(*args, propagate="clip", as_of=AS_OF)
    impact = p.plan(*args, propagate="impact", as_of=AS_OF)
    # clip: what dbt runs (the requested days, the month batch); the rest of August is stale
    assert (clip.model("fct_daily_share").first, clip.model("fct_daily_share").last) == (
        "2026-08-14",
        "2026-08-15",
    )
    assert [f.model for f in clip.findings if f.code == "CLIPPED_IMPACT"] == ["fct_daily_share"]
    # impact: every day of the changed month
    assert (impact.model("fct_daily_share").first, impact.model("fct_daily_share").last) == (
        "2026-08-01",
        "2026-08-31",
    )
    assert impact.model("fct_monthly_sales").period == "2026-08"
    # selecting only the daily model leaves its downstream stale, with a warning each
    only = p.plan("fct_daily_sales", "2026-08-14", "2026-08-16", as_of=AS_OF)
    assert {f.model for f in only.findings if f.code == "STALE_DOWNSTREAM"} == {
        "fct_monthly_sales",
        "fct_sales_7d",
        "fct_daily_share",
    }
