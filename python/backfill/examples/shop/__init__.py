"""The shop example: a project (``backfill.yml``, ``models/``, ``fixes/``) and its data generator.

>>> from backfill.examples import shop
>>> root = shop.create("/tmp/shop")     # doctest: +SKIP  (project files + raw data)
>>> shop.fix(root)                      # doctest: +SKIP  (the fixed fct_daily_sales)

The generator is deterministic: integer arithmetic inside DuckDB, no random state, so the same
rows come out on every machine. Raw orders and order items cover 2026-01-01 to 2026-11-30
(about 100,000 orders and 250,000 lines). Until July a line's discount arrives as a fraction in
``discount``; from 1 August the new checkout sends it as a percentage in ``discount_pct``, which
the original fct_daily_sales ignores: revenue from 1 August is overstated by about 2%.

Run ``python -m backfill.examples.shop --dir DIR`` to write the project and its data.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

__all__ = [
    "FIRST_DAY",
    "FIX_DAY",
    "LAST_DAY",
    "PROJECT_DIR",
    "create",
    "fix",
    "generate",
    "use_spark",
]

PROJECT_DIR = Path(__file__).resolve().parent
FIRST_DAY = dt.date(2026, 1, 1)
FIX_DAY = dt.date(2026, 8, 1)  # discounts move to discount_pct; the bug starts
LAST_DAY = dt.date(2026, 11, 30)

# mix(x): a 31-bit linear congruential step, exact in BIGINT for 0 <= x < 2^31.
_GENERATE = """
CREATE SCHEMA IF NOT EXISTS raw;
CREATE OR REPLACE TEMP MACRO mix(x) AS ((x * 1103515245 + 12345) % 2147483648);
CREATE OR REPLACE TABLE raw.orders AS
WITH days AS (
    SELECT d, DATE '{first}' + CAST(d AS INTEGER) AS day
    FROM range(0, {days}) t(d)
), sizes AS (
    SELECT d, day,
           {per_day} + mix(d + 7) % ({per_day} // 3)
             + CASE WHEN dayofweek(day) IN (0, 6) THEN {per_day} // 5 ELSE 0 END
             + d * {per_day} // 1000 AS n
    FROM days
)
SELECT
    d * 10000 + k AS order_id,
    1 + mix(d * 10000 + k) % 20000 AS customer_id,
    CAST(day AS TIMESTAMP) + to_seconds(mix(d * 10000 + k + 1) % 86400) AS ordered_at,
    CASE mix(d * 10000 + k + 2) % 100 WHEN 0 THEN 'DE' WHEN 1 THEN 'AT' ELSE
        ['DE', 'FR', 'NL', 'IT', 'ES'][1 + mix(d * 10000 + k + 3) % 5] END AS country,
    CASE WHEN mix(d * 10000 + k + 4) % 100 < 5 THEN 'cancelled'
         WHEN mix(d * 10000 + k + 4) % 100 = 5 THEN 'TEST'
         ELSE 'completed' END AS status
FROM sizes, range(0, 2 * {per_day}) r(k)
WHERE k < n
ORDER BY order_id;

CREATE OR REPLACE TABLE raw.order_items AS
WITH lines AS (
    SELECT o.order_id, o.ordered_at, l.line_no,
           mix(o.order_id * 8 + l.line_no) AS h
    FROM raw.orders o, range(1, 5) l(line_no)
    WHERE l.line_no <= 1 + mix(o.order_id * 3 + 1) % 4
), priced AS (
    SELECT *, 1 + h % 500 AS product_id,
           CASE WHEN mix(h + 1) % 100 < 8 THEN 5 WHEN mix(h + 1) % 100 < 16 THEN 10
                WHEN mix(h + 1) % 100 < 20 THEN 20 ELSE 0 END AS pct
    FROM lines
)
SELECT
    order_id,
    CAST(line_no AS INTEGER) AS line_no,
    CAST(product_id AS INTEGER) AS product_id,
    CAST(1 + mix(h + 2) % 3 AS INTEGER) AS quantity,
    CAST((199 + mix(product_id * 17) % 9800) * 0.01 AS DECIMAL(10, 2)) AS unit_price,
    CASE WHEN ordered_at < TIMESTAMP '{fix}' THEN CAST(pct * 0.01 AS DECIMAL(4, 3)) END
        AS discount,
    CASE WHEN ordered_at >= TIMESTAMP '{fix}' THEN CAST(pct AS DECIMAL(5, 2)) END
        AS discount_pct,
    ordered_at
FROM priced
ORDER BY order_id, line_no;
"""


def generate(
    database: str | Path,
    *,
    orders_per_day: int = 240,
    first: dt.date = FIRST_DAY,
    last: dt.date = LAST_DAY,
) -> dict[str, int]:
    """Writes ``raw.orders`` and ``raw.order_items`` into the DuckDB file ``database``
    (replacing them); returns their row counts. Same arguments, same rows, everywhere."""
    import duckdb

    if (
        isinstance(orders_per_day, bool)
        or not isinstance(orders_per_day, int)
        or not 3 <= orders_per_day <= 4000
    ):
        raise ValueError(f"orders_per_day {orders_per_day!r}: expected an integer in 3..4000")
    if last < first:
        raise ValueError(f"last day {last} is before first day {first}")
    sql = _GENERATE.format(
        first=first.isoformat(),
        days=(last - first).days + 1,
        per_day=orders_per_day,
        fix=FIX_DAY.isoformat(),
    )
    con = duckdb.connect(str(database))
    try:
        con.execute(sql)
        counts = {
            t: int(con.execute(f"SELECT count(*) FROM raw.{t}").fetchone()[0])  # type: ignore[index]
            for t in ("orders", "order_items")
        }
    finally:
        con.close()
    return counts


def create(directory: str | Path, *, data: bool = True, orders_per_day: int = 240) -> Path:
    """Copies the shop project (with the bug) into ``directory`` and, with ``data``, generates
    its raw data into ``directory/warehouse.duckdb``. Returns the project directory."""
    dest = Path(directory)
    if (dest / "backfill.yml").exists():
        raise FileExistsError(f"{dest} already holds a project (backfill.yml)")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(PROJECT_DIR / "backfill.yml", dest / "backfill.yml")
    for sub in ("models", "fixes"):
        shutil.copytree(PROJECT_DIR / sub, dest / sub, dirs_exist_ok=True)
    if data:
        generate(dest / "warehouse.duckdb", orders_per_day=orders_per_day)
    return dest


def fix(directory: str | Path) -> Path:
    """Puts the fixed fct_daily_sales in place of the buggy one; returns the model file."""
    target = Path(directory) / "models" / "fct_daily_sales.sql"
    shutil.copy2(Path(directory) / "fixes" / "fct_daily_sales.sql", target)
    return target


def use_spark(
    directory: str | Path, *, master: str = "local[*]", conf: dict[str, str] | None = None
) -> Path:
    """Moves a created shop onto Spark + Iceberg: ``backfill.yml`` names the Spark engine (an
    Iceberg catalog in ``directory/iceberg``) and the raw tables generated into DuckDB are loaded
    into Iceberg as Arrow. Returns the project directory."""
    import re

    import duckdb
    import pyarrow as pa  # type: ignore[import-untyped]

    from ...engines.spark import SparkEngine
    from ...model.files import load_project

    root = Path(directory)
    settings = ", ".join(f"{k}: '{v}'" for k, v in (conf or {}).items())
    yml = root / "backfill.yml"
    yml.write_text(
        re.sub(
            r"engine:\n(?:  .*\n)+",
            f"engine:\n  type: spark\n  master: '{master}'\n  catalog: iceberg\n"
            f"  conf: {{{settings}}}\n",
            yml.read_text(encoding="utf-8"),
        ),
        encoding="utf-8",
    )
    project = load_project(root)
    assert project.settings is not None
    engine = SparkEngine.from_settings(project.settings.engine)
    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        for table in ("orders", "order_items"):
            # A stream of batches: neither this process nor Spark's driver holds the table.
            engine.load_table(
                table,
                pa.RecordBatchReader.from_stream(
                    con.sql(f"SELECT * FROM raw.{table} ORDER BY order_id")
                ),
                event_time="ordered_at",
            )
    finally:
        con.close()
    return root
