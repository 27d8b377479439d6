"""The engines the engine conformance suite runs, each on the shop in its own project format.

A case is a private copy of the built shop (raw data, published tables with the discount bug)
plus the engine its project names. Everything the suite checks goes through the Engine interface
and the product's stages; only two things are the harness's own, per engine, because the interface
has (rightly) no call for them: rewriting a raw table in another physical order, and reading
several published tables in ONE snapshot (to see what a concurrent reader sees).

To add an engine: write its case here (a builder that copies a built shop into a fresh warehouse
of that engine) and add its name to ``ENGINES``. The Postgres case copies a database built once
per session (``CREATE DATABASE ... TEMPLATE``, see ``pg_engine_support.PgShop``); the
postgres-partitioned case is the same engine on a shop whose models have partitioned tables
(``pg_engine_support.TABLE_PARTITIONS``: publish exchanges partitions).
"""

from __future__ import annotations

import datetime as dt
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import psycopg

import backfill
from backfill.engines import PUBLISHED, Engine
from backfill.engines.postgres import PostgresEngine, quote
from backfill.examples import dbt_shop, shop
from pg_engine_support import PgShop

ENGINES = ("duckdb", "dbt-duckdb", "postgres", "postgres-partitioned", "spark")
#: the plans' "now": after every period the suite touches (the shop's data ends in 2026)
AS_OF = "2027-06-01"
UTC = dt.timezone.utc


def day(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


@dataclass
class Case:
    """One engine on one copy of the shop."""

    name: str
    root: Path
    load: Callable[[Path], backfill.Project]
    fix: Callable[[Path], Any]
    project: backfill.Project = field(init=False)
    engine: Engine = field(init=False)

    def __post_init__(self) -> None:
        self.reload()

    def reload(self) -> None:
        """(Re)loads the project from its files, e.g. after :meth:`apply_fix` (the engine it
        replaces is closed: its pooled connections would leak)."""
        if hasattr(self, "engine"):
            self.engine.close()
        self.project = self.load(self.root)
        assert self.project.settings is not None
        self.engine = backfill.engines.registry.engine_for(self.project)

    def apply_fix(self) -> None:
        """The discount bug's fix in the project's fct_daily_sales (revenue ~2% lower)."""
        self.fix(self.root)
        self.reload()

    # -- the harness's own reads and writes (not part of the Engine interface) ----------------
    def _connect(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(self.root / "warehouse.duckdb"))

    def reverse_raw(self, table: str) -> None:
        """Rewrites ``raw.<table>`` with the same rows in the opposite physical order."""
        self.engine.close()
        con = self._connect()
        try:
            con.execute(
                f"CREATE TABLE raw._reversed AS SELECT * FROM raw.{table} ORDER BY rowid DESC"
            )
            con.execute(f"DROP TABLE raw.{table}")
            con.execute(f"ALTER TABLE raw._reversed RENAME TO {table}")
        finally:
            con.close()

    def first_rows(self, table: str, n: int = 3) -> list[tuple[Any, ...]]:
        con = self._connect()
        try:
            return con.execute(f"SELECT * FROM raw.{table} LIMIT {n}").fetchall()
        finally:
            con.close()

    def snapshot_sums(self, relations: Sequence[tuple[str, str]]) -> tuple[Any, ...]:
        """sum(column) of each published (model, column), all read in ONE query (one snapshot),
        through the engine's own connection as any other reader of this process would."""
        # Both shop engines keep their tables in a DuckDB warehouse (dbt-duckdb's is .warehouse).
        warehouse = getattr(self.engine, "warehouse", self.engine)
        parts = [
            f"(SELECT sum({column}) FROM {warehouse.relation(model, PUBLISHED, self.project)})"
            for model, column in relations
        ]
        with warehouse.connect() as cur:
            row = cur.execute("SELECT " + ", ".join(parts)).fetchone()
        assert row is not None
        return tuple(row)


#: the published sums a concurrent reader watches during a publish or rollback
WATCHED = (
    ("fct_daily_sales", "revenue"),
    ("fct_monthly_sales", "revenue"),
    ("fct_sales_7d", "revenue_7d"),
)


def seen_during(case: Case, action: Callable[[], Any]) -> list[tuple[Any, ...]]:
    """What a reader thread saw of :data:`WATCHED` (one snapshot a read) while ``action`` ran."""
    seen: list[tuple[Any, ...]] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.append(case.snapshot_sums(WATCHED))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        action()
    finally:
        stop.set()
        thread.join()
    assert seen, "the reader ran"
    return seen


@dataclass
class PgCase(Case):
    """The shop in its own copy of a Postgres database built once per session."""

    url: str = ""

    def _engine(self) -> PostgresEngine:
        assert isinstance(self.engine, PostgresEngine)
        return self.engine

    def reverse_raw(self, table: str) -> None:
        self.engine.close()
        with psycopg.connect(self.url, autocommit=True) as conn, conn.transaction():
            t = quote(table)
            conn.execute(f"CREATE TABLE raw._reversed AS SELECT * FROM raw.{t} ORDER BY ctid DESC")
            conn.execute(f"DROP TABLE raw.{t}")
            conn.execute(f"ALTER TABLE raw._reversed RENAME TO {t}")

    def first_rows(self, table: str, n: int = 3) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url) as conn:  # a sequential scan: the physical order
            return conn.execute(f"SELECT * FROM raw.{quote(table)} LIMIT {int(n)}").fetchall()

    def snapshot_sums(self, relations: Sequence[tuple[str, str]]) -> tuple[Any, ...]:
        eng = self._engine()
        parts = [
            f"(SELECT sum({quote(column)}) FROM {quote(eng.schema)}.{quote(model)})"
            for model, column in relations
        ]
        with eng.connect() as conn:  # one statement: one snapshot
            row = conn.execute("SELECT " + ", ".join(parts)).fetchone()
        assert row is not None
        return tuple(row)


class SparkCase(Case):
    """The shop on Spark + Iceberg: the harness reads and rewrites Iceberg tables through the
    engine's SparkSession."""

    def _sql(self, sql: str) -> list[tuple[Any, ...]]:
        from backfill.engines.spark.sql import arrow_rows

        return arrow_rows(self.engine.spark, sql)  # type: ignore[attr-defined]

    def reverse_raw(self, table: str) -> None:
        from pyspark.sql import functions as F

        engine: Any = self.engine
        name = engine.table(table, "raw")
        df = engine.spark.table(name).orderBy(F.desc("order_id")).coalesce(1)
        # No distribution or sort by Iceberg: the files keep the reversed order.
        df.writeTo(name).option("distribution-mode", "none").overwrite(F.lit(True))

    def first_rows(self, table: str, n: int = 3) -> list[tuple[Any, ...]]:
        return self._sql(f"SELECT * FROM {self.engine.table(table, 'raw')} LIMIT {n}")  # type: ignore[attr-defined]

    def snapshot_sums(self, relations: Sequence[tuple[str, str]]) -> tuple[Any, ...]:
        """Iceberg commits one table at a time (``atomic_publish=False``): each sum reads its
        table's current snapshot, in one query."""
        engine: Any = self.engine
        parts = [
            f"(SELECT sum({column}) FROM {engine.table(model)})" for model, column in relations
        ]
        return tuple(self._sql("SELECT " + ", ".join(parts))[0])


def _copy_shop(built: Path, dest: Path) -> Path:
    shutil.copytree(built, dest, ignore=shutil.ignore_patterns(".backfill", ".test_profiles"))
    return dest


def make_case(
    name: str,
    built_shop: Path,
    built_dbt_shop: Path,
    tmp: Path,
    built_pg_shop: PgShop | None = None,
    built_spark_shop: Path | None = None,
) -> Case:
    if name == "duckdb":
        return Case(name, _copy_shop(built_shop, tmp / "shop"), backfill.Project.load, shop.fix)
    if name == "dbt-duckdb":
        return Case(
            name,
            _copy_shop(built_dbt_shop, tmp / "dbt_shop"),
            backfill.Project.from_dbt,
            dbt_shop.fix,
        )
    if name in ("postgres", "postgres-partitioned"):
        # postgres-partitioned: the shop's tables declaratively partitioned (table_partitions)
        assert built_pg_shop is not None, f"the {name} case needs its built Postgres shop"
        root, url = built_pg_shop.copy(tmp / "shop_pg")
        return PgCase(name, root, backfill.Project.load, shop.fix, url=url)
    if name == "spark":
        import spark_support

        assert built_spark_shop is not None
        return SparkCase(
            name,
            spark_support.copy_built(built_spark_shop, tmp / "spark_shop"),
            backfill.Project.load,
            shop.fix,
        )
    raise ValueError(f"no engine case {name!r}; expected one of {ENGINES}")
