"""The warehouses publish_bench runs on: the fact project's own DuckDB file, or the same rows
in PostgreSQL (``--engine postgres``). A side gives the benchmark a connection of its own (the
"keeper": the delete+insert competitor and the checks), a reader's connection, the engine class
whose publish it times, and the checks' SQL in the warehouse's dialect.

On PostgreSQL the published ``main.fct_order_lines`` holds the DuckDB build's rows (100M at full
size: copied once through ADBC, as Arrow batches), and ``raw.order_lines`` the raw rows of the
90-day window only (what the backfill reads; the other 275 days of raw data would only take
loading time). The tables are as the engine builds them: no index. The server is the tests'
throwaway one (``pg_support``: ``fsync=off``, ``synchronous_commit=off``,
``full_page_writes=off``) with ``max_wal_size = 8GB`` (publishing 25M rows otherwise
checkpoints every few seconds); ``--url`` names a server of yours instead.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import run_bench
import scale_fact

PUB = f'main."{scale_fact.MODEL}"'
WINDOW = (
    f"ordered_at >= TIMESTAMP '{scale_fact.WINDOW_START}' AND "
    f"ordered_at < TIMESTAMP '{scale_fact.WINDOW_END}'"
)


class DuckSide:
    """The fact project's DuckDB warehouse."""

    name = "duckdb"

    def __init__(self, root: Path) -> None:
        from backfill.engines.duckdb.engine import DuckDBEngine

        self.root = root
        self.engine_cls: Any = DuckDBEngine
        self.keeper = duckdb.connect(str(root / "warehouse.duckdb"))
        self.keeper.execute(f"SET memory_limit = '{run_bench.MEMORY_LIMIT}'")
        self.keeper.execute("SET threads = 2")
        self.keeper.execute("SET TimeZone = 'UTC'")

    def settle(self) -> None:
        """Nothing: DuckDB checkpoints by itself (a CHECKPOINT here would wait for the engine's
        open connections), and its deletes leave no dead rows for later scans to wade through."""

    def reader(self) -> Any:
        """A connection for the reader thread (the process's instance: its own cursor)."""
        return duckdb.connect(str(self.root / "warehouse.duckdb"))

    def copy(self, name: str, select: str) -> None:
        self.keeper.execute(f"CREATE OR REPLACE TABLE {name} AS {select}")

    def drop(self, name: str) -> None:
        self.keeper.execute(f"DROP TABLE IF EXISTS {name}")

    def differs(self, left: str, right: str) -> int:
        """Rows of the published window not in ``right`` and the other way round."""
        return run_bench.window_differs(self.keeper, left, right)

    def day_prints(self, relation: str) -> set[Any]:
        return set(run_bench.day_fingerprints(self.keeper, relation))

    def close(self) -> None:
        self.keeper.close()


class PgSide:
    """The same fact table in PostgreSQL, with a project whose engine is that server."""

    name = "postgres"

    def __init__(self, root: Path, url: str) -> None:
        import psycopg

        from backfill.engines.postgres import PostgresEngine

        self.root = root
        self.url = url
        self.engine_cls = PostgresEngine
        self.keeper = psycopg.connect(url, autocommit=True)
        self.keeper.execute("SET TIME ZONE 'UTC'")

    #: seconds PostgresEngine.partition_table took to make the fact table partitioned
    partitioned_in: float | None = None

    def partition(self, grain: str) -> None:
        """The fact table made partitioned by ``grain`` (its rows copied, timed)."""
        import time

        import backfill
        from backfill.engines.registry import engine_for

        project = backfill.Project.load(self.root)
        engine = engine_for(project)
        try:
            began = time.perf_counter()
            made = engine.partition_table(project, scale_fact.MODEL)
            self.partitioned_in = time.perf_counter() - began
        finally:
            engine.close()
        assert made > 0, "the fact table was partitioned already"
        self.name = f"postgres, table_partitions: {grain}"
        self.keeper.execute(f"VACUUM ANALYZE {PUB}")

    def settle(self) -> None:
        """Before each timed competitor: the dead rows the one before left (25M at full size)
        vacuumed away, so no competitor scans another's (autovacuum would, at some moment)."""
        self.keeper.execute(f"VACUUM ANALYZE {PUB}")

    def reader(self) -> Any:
        import psycopg

        con = psycopg.connect(self.url, autocommit=True)
        con.execute("SET TIME ZONE 'UTC'")
        return con

    def copy(self, name: str, select: str) -> None:
        self.keeper.execute(f"DROP TABLE IF EXISTS {name}")
        self.keeper.execute(f"CREATE TABLE {name} AS {select}")
        self.keeper.execute(f"ANALYZE {name}")

    def drop(self, name: str) -> None:
        self.keeper.execute(f"DROP TABLE IF EXISTS {name}")

    def differs(self, left: str, right: str) -> int:
        a = f"(SELECT * FROM {left} WHERE {WINDOW})"
        b = f"(SELECT * FROM {right})"
        row = self.keeper.execute(
            f"SELECT (SELECT count(*) FROM ({a} EXCEPT ALL {b}) x) + "
            f"(SELECT count(*) FROM ({b} EXCEPT ALL {a}) y)"
        ).fetchone()
        assert row is not None
        return int(row[0])

    def day_prints(self, relation: str) -> set[Any]:
        """Per day: rows and the sum of the rows' text hashes (one scan)."""
        return set(
            self.keeper.execute(
                f"SELECT CAST(ordered_at AS date) d, count(*), "
                f"sum(hashtextextended(t::text, 0)::numeric) FROM {relation} t GROUP BY d"
            ).fetchall()
        )

    def close(self) -> None:
        self.keeper.close()


def postgres_side(
    duck_root: Path,
    url: str | None,
    stack: contextlib.ExitStack,
    table_partitions: str | None = None,
) -> PgSide:
    """The fact table of ``duck_root`` (built and fixed) copied into PostgreSQL (a throwaway
    server unless ``url``), and a copy of its project on that server; with
    ``table_partitions`` the model's table is made partitioned by that grain
    (``PostgresEngine.partition_table``, timed as ``PgSide.partitioned_in``)."""
    import psycopg

    if url is None:
        from pg_support import PgServer

        server = PgServer.start()
        stack.callback(server.stop)
        stack.callback(shutil.rmtree, server.base, True)
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET max_wal_size = '8GB'")
            conn.execute("SELECT pg_reload_conf()")
        url = server.create_database("publish_bench")
    load(duck_root, url)
    root = duck_root.parent / f"{duck_root.name}-postgres"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for sub in ("models", "fixes"):
        shutil.copytree(duck_root / sub, root / sub)
    yml = (duck_root / "backfill.yml").read_text()
    lines = [
        f'engine: {{type: postgres, url: "{url}", schema: main}}'
        if line.startswith("engine:")
        else line
        for line in yml.splitlines()
        if not line.startswith("publish:")
    ]
    if table_partitions is not None:
        lines = [
            line.replace(
                "{tags: [finance]}", f"{{tags: [finance], table_partitions: {table_partitions}}}"
            )
            if line.startswith(f"  {scale_fact.MODEL}:")
            else line
            for line in lines
        ]
    (root / "backfill.yml").write_text("\n".join(lines) + "\n")
    stack.callback(shutil.rmtree, root, True)
    side = PgSide(root, url)
    if table_partitions is not None:
        side.partition(table_partitions)
    return side


def load(duck_root: Path, url: str) -> dict[str, int]:
    """``main.fct_order_lines`` (all of it) and ``raw.order_lines`` (the window's days) of the
    DuckDB warehouse into the Postgres database at ``url``, as Arrow batches through ADBC."""
    import adbc_driver_postgresql.dbapi as adbc
    import psycopg
    import pyarrow as pa

    from backfill.examples.shop.postgres import pg_type

    tables = {
        ("main", scale_fact.MODEL): f"SELECT * FROM {PUB} ORDER BY ordered_at",
        ("raw", "order_lines"): f"SELECT * FROM raw.order_lines WHERE {WINDOW}",
    }
    counts: dict[str, int] = {}
    src = duckdb.connect(str(duck_root / "warehouse.duckdb"), read_only=True)
    try:
        src.execute("SET threads = 2")
        with psycopg.connect(url, autocommit=True) as pg, adbc.connect(url) as conn:
            for (schema, table), select in tables.items():
                reader = pa.RecordBatchReader.from_stream(src.sql(select))
                cols = ", ".join(f'"{f.name}" {pg_type(f.type)}' for f in reader.schema)
                pg.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                pg.execute(f'DROP TABLE IF EXISTS "{schema}"."{table}"')
                pg.execute(f'CREATE TABLE "{schema}"."{table}" ({cols})')
                with conn.cursor() as cur:
                    counts[f"{schema}.{table}"] = int(
                        cur.adbc_ingest(table, reader, mode="append", db_schema_name=schema)
                    )
                conn.commit()
                pg.execute(f'VACUUM ANALYZE "{schema}"."{table}"')
    finally:
        src.close()
    return counts
