"""The shop on PostgreSQL: the same project files and models, ``engine: postgres``, and the
same raw rows loaded into the server.

>>> from backfill.examples.shop import postgres
>>> root = postgres.create("/tmp/shop_pg", "postgresql://me@localhost/shop")  # doctest: +SKIP

The generator stays in DuckDB (its integer arithmetic defines the rows): the raw tables are
generated into a temporary DuckDB file and copied into the server's ``raw`` schema as Arrow
batches through ADBC (no row-by-row inserts). The models are portable SQL and run unchanged on
both engines.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from . import create as create_duckdb
from . import generate

__all__ = ["PUBLISHED_TABLES", "RAW_TABLES", "create", "drop_published", "load_raw", "pg_type"]

RAW_TABLES = ("orders", "order_items")
#: What the shop's models publish, and the consumers' changelog: a demo that starts over drops them.
PUBLISHED_TABLES = (
    "clean_orders",
    "clean_order_items",
    "fct_daily_sales",
    "fct_monthly_sales",
    "fct_sales_7d",
    "backfill_changelog",
)


def pg_type(arrow_type: Any) -> str:
    """The Postgres column type of an Arrow type of the generated raw tables."""
    import pyarrow as pa  # type: ignore[import-untyped]

    t = arrow_type
    if pa.types.is_decimal(t):
        return f"numeric({t.precision}, {t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamptz" if t.tz else "timestamp"
    simple = {
        pa.int64(): "bigint",
        pa.int32(): "integer",
        pa.int16(): "smallint",
        pa.float64(): "double precision",
        pa.float32(): "real",
        pa.bool_(): "boolean",
        pa.string(): "text",
        pa.large_string(): "text",
        pa.date32(): "date",
    }
    if t in simple:
        return simple[t]
    raise ValueError(f"no Postgres type for Arrow type {t}")


#: the raw tables' event time (backfill.yml's sources)
RAW_EVENT_TIME = "ordered_at"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def load_raw(duckdb_file: str | Path, url: str, *, schema: str = "raw") -> dict[str, int]:
    """Copies ``raw.orders`` and ``raw.order_items`` of a DuckDB file into ``schema`` of the
    Postgres database at ``url`` (replacing them); returns their row counts."""
    import adbc_driver_postgresql.dbapi as adbc  # type: ignore[import-untyped]
    import duckdb
    import psycopg
    import pyarrow as pa

    counts: dict[str, int] = {}
    src = duckdb.connect(str(duckdb_file), read_only=True)
    try:
        with psycopg.connect(url, autocommit=True) as pg, adbc.connect(url) as conn:
            pg.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(schema)}")
            for table in RAW_TABLES:
                # the Arrow C stream interface: batches, on every DuckDB version we support
                reader = pa.RecordBatchReader.from_stream(src.sql(f"SELECT * FROM raw.{table}"))
                cols = ", ".join(f"{_quote(f.name)} {pg_type(f.type)}" for f in reader.schema)
                target = f"{_quote(schema)}.{_quote(table)}"
                pg.execute(f"DROP TABLE IF EXISTS {target}")
                pg.execute(f"CREATE TABLE {target} ({cols})")
                with conn.cursor() as cur:
                    counts[table] = int(
                        cur.adbc_ingest(table, reader, mode="append", db_schema_name=schema)
                    )
                conn.commit()
                # Every task reads one period of a raw table: without an index on its event
                # time each one scans the whole table (a raw table loaded in time order, as
                # these are, needs only a BRIN index: a few pages for millions of rows).
                pg.execute(f"CREATE INDEX ON {target} USING brin ({_quote(RAW_EVENT_TIME)})")
                pg.execute(f"ANALYZE {target}")
    finally:
        src.close()
    return counts


_ENGINE_BLOCK = re.compile(r"^engine:\n(?:  .*\n)+", re.M)


def drop_published(url: str, schema: str) -> None:
    """Drops the shop's published tables (and changelog) of an earlier run from ``schema``. It
    connects through the warehouse engine, so a bad URL or a missing permission fails with the
    engine's message (password masked) before anything is dropped or written."""
    from ...engines.postgres import PostgresEngine, quote

    warehouse = PostgresEngine(url, schema=schema)
    try:
        with warehouse.connect() as conn:
            for name in PUBLISHED_TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {quote(schema)}.{quote(name)}")
    finally:
        warehouse.close()


def create(
    directory: str | Path,
    url: str,
    *,
    schema: str = "public",
    orders_per_day: int = 240,
    start_over: bool = False,
) -> Path:
    """Copies the shop project (with the bug) into ``directory`` with ``engine: postgres`` at
    ``url`` (published models in ``schema``) and loads its raw data into the server's ``raw``
    schema. ``start_over`` first drops what an earlier shop published in ``schema``
    (:func:`drop_published`), so the story starts from nothing. Returns the project directory."""
    if start_over:
        drop_published(url, schema)
    root = create_duckdb(directory, data=False)
    yml = root / "backfill.yml"
    text = yml.read_text(encoding="utf-8")
    block = (
        f"engine:\n  type: postgres\n  url: {json.dumps(url)}\n"
        f"  schema: {schema}               # published models\n"
    )
    yml.write_text(_ENGINE_BLOCK.sub(block, text, count=1), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="shop-raw-") as tmp:
        # not raw.duckdb: a catalog named raw would shadow the raw schema
        generated = Path(tmp) / "generated.duckdb"
        generate(generated, orders_per_day=orders_per_day)
        load_raw(generated, url)
    return root
