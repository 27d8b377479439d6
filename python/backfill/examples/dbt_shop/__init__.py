"""The shop example as a dbt-duckdb project, sharing the shop's data generator.

>>> from backfill.examples import dbt_shop
>>> root = dbt_shop.create("/tmp/dbt_shop")   # doctest: +SKIP  (dbt project + raw data)
>>> dbt_shop.fix(root)                        # doctest: +SKIP  (the fixed fct_daily_sales)

    raw.orders, raw.order_items (sources, event_time ordered_at)
      -> clean_orders, clean_order_items          microbatch, day
      -> fct_daily_sales                          microbatch, day (the discount bug)
      -> fct_monthly_sales                        microbatch, month
      -> fct_sales_7d                             table (a rolling window)
    clean_orders + country_regions (seed, no event_time) -> fct_region_orders  microbatch, day

``profiles.yml`` in the project points dbt-duckdb at ``warehouse.duckdb`` in the project
directory (relative: run dbt from the project directory, or pass ``--profiles-dir`` and ``cd``).
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from ..shop import FIRST_DAY, FIX_DAY, LAST_DAY, generate

__all__ = ["FIRST_DAY", "FIX_DAY", "LAST_DAY", "PROJECT_DIR", "WAREHOUSE", "create", "fix"]

PROJECT_DIR = Path(__file__).resolve().parent
WAREHOUSE = "warehouse.duckdb"
_FILES = ("dbt_project.yml", "profiles.yml")
_DIRS = ("models", "seeds", "fixes")


def create(
    directory: str | Path,
    *,
    data: bool = True,
    orders_per_day: int = 240,
    first: dt.date = FIRST_DAY,
    last: dt.date = LAST_DAY,
) -> Path:
    """Copies the dbt shop project (with the bug) into ``directory`` and, with ``data``, writes
    the raw tables (``raw.orders``, ``raw.order_items``) into ``directory/warehouse.duckdb``
    with the shop's generator. Returns the project directory."""
    dest = Path(directory)
    if (dest / "dbt_project.yml").exists():
        raise FileExistsError(f"{dest} already holds a dbt project (dbt_project.yml)")
    dest.mkdir(parents=True, exist_ok=True)
    for name in _FILES:
        shutil.copy2(PROJECT_DIR / name, dest / name)
    for sub in _DIRS:
        shutil.copytree(
            PROJECT_DIR / sub,
            dest / sub,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    if data:
        generate(dest / WAREHOUSE, orders_per_day=orders_per_day, first=first, last=last)
    return dest


def fix(directory: str | Path) -> Path:
    """Puts the fixed fct_daily_sales in place of the buggy one; returns the model file."""
    target = Path(directory) / "models" / "marts" / "fct_daily_sales.sql"
    shutil.copy2(Path(directory) / "fixes" / "fct_daily_sales.sql", target)
    return target
