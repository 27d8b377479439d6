"""Helpers for the dbt tests: run dbt on a project in this process (isolated, with a generated
profile holding the absolute warehouse path, so nothing depends on the working directory)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb

from backfill.integrations.dbt.invoke import Invocation, invoke
from backfill.integrations.dbt.profile import GENERATED_TARGET, read_profile, write_profile

AS_OF = "2027-06-01"  # after every batch the tests plan
FIRST, LAST = dt.date(2026, 7, 20), dt.date(2026, 8, 20)  # the small shop's raw data
BUILD_START, BUILD_END = "2026-07-20", "2026-08-21"
MODELS = (
    "clean_orders",
    "clean_order_items",
    "fct_daily_sales",
    "fct_monthly_sales",
    "fct_sales_7d",
    "fct_region_orders",
)


def dbt(root: Path, *args: str, check: bool = True) -> Invocation:
    """``dbt ARGS`` on the project at ``root`` with its own target (schema main)."""
    profiles = write_profile(read_profile(root), root / ".test_profiles", schema="main")
    res = invoke(
        list(args),
        project_dir=root,
        profiles_dir=profiles,
        target=GENERATED_TARGET,
        target_path=root / ".test_profiles" / "target",
        check=check,
    )
    if check:
        assert res.success, f"dbt {' '.join(args)} failed: {res.exception or res.result}"
    return res


def build(root: Path) -> None:
    """``dbt seed`` + ``dbt run`` over the whole raw data: the published tables."""
    dbt(root, "seed")
    dbt(root, "run", "--event-time-start", BUILD_START, "--event-time-end", BUILD_END)


def fingerprints(root: Path, models: tuple[str, ...] = MODELS) -> dict[str, tuple[int, int]]:
    """(rows, order-independent hash) of each published table."""
    con = duckdb.connect(str(root / "warehouse.duckdb"))
    try:
        out = {}
        for m in models:
            cols = [d[0] for d in con.execute(f"SELECT * FROM main.{m} LIMIT 0").description]
            row = con.execute(
                f"SELECT count(*), coalesce(sum(hash({', '.join(sorted(cols))})"
                f"::HUGEINT), 0) FROM main.{m}"
            ).fetchone()
            assert row is not None
            out[m] = (int(row[0]), int(row[1]))
        return out
    finally:
        con.close()


def query(root: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(root / "warehouse.duckdb"))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()
