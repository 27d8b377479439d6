"""The dbt engine's own warehouse steps on a dbt-postgres warehouse (see :mod:`.engine`, whose
DuckDB steps these mirror in Postgres' SQL).

dbt writes a backfill into the *work* schema; these steps seed it (copies of backfilled
microbatch tables, views on what they read), copy what dbt rebuilt into the audit area
``audit_<id>`` (so audit and publish run on :class:`~backfill.engines.postgres.PostgresEngine`
unchanged), and drop both. Relations are the engine's quoted ``"schema"."name"`` strings;
``to_regclass`` resolves them.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ...engines import WriteResult
from ...engines.postgres import PostgresEngine
from ...engines.postgres.sql import (
    audit_schema,
    fingerprint_where,
    in_periods,
    qualified,
    quote,
    table_columns,
)

__all__ = ["copy_to_audit", "drop_work", "exists", "seed_table", "seed_view", "seed_work"]


def exists(conn: psycopg.Connection[Any], relation: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [relation]).fetchone()
    return bool(row and row[0])


def _schema_of(relation: str) -> str:
    return relation.split(".")[0]


def seed_work(
    engine: PostgresEngine, backfilled: list[tuple[str, str, bool]], read: list[tuple[str, str]]
) -> None:
    """Seeds the work schema: for each backfilled (work, published, microbatch) a copy of the
    published table if it is a microbatch model (else only its schema); for each read
    (work, published) a view."""
    with engine.connect() as conn:
        for work, published, batched in backfilled:
            if batched:
                seed_table(conn, work, published)
            else:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_schema_of(work)}")
        for work, published in read:
            seed_view(conn, work, published)


def seed_table(conn: psycopg.Connection[Any], work: str, published: str) -> None:
    """``work``: a copy of the published table (dbt's batches replace their periods in it)."""
    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_schema_of(work)}")
    if exists(conn, published) and not exists(conn, work):
        conn.execute(f"CREATE TABLE {work} AS SELECT * FROM {published}")


def seed_view(conn: psycopg.Connection[Any], work: str, published: str) -> None:
    """``work``: a view on the published relation of a model a backfilled one reads."""
    if work != published and exists(conn, published):
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_schema_of(work)}")
        conn.execute(f"CREATE OR REPLACE VIEW {work} AS SELECT * FROM {published}")


def copy_to_audit(
    engine: PostgresEngine,
    model: str,
    area: Any,
    work: str,
    event_time: str | None,
    start: Any,
    end: Any,
    seconds: float,
) -> WriteResult:
    """Copies what dbt wrote into ``work`` for one task into the audit area (or fingerprints
    it in place for a direct run): the task's period, or the whole table; one transaction."""
    schema, name = engine.relation(model, area)
    target = qualified(schema, name)
    with engine.connect() as conn, conn.transaction():
        if not area.direct:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        columns = [c.name for c in table_columns(conn, *_split(work)) or []]
        listed = ", ".join(quote(c) for c in columns)
        if start is None or end is None or not event_time:
            if not area.direct:
                conn.execute(f"DROP TABLE IF EXISTS {target}")
                conn.execute(f"CREATE TABLE {target} AS SELECT * FROM {work}")
            return WriteResult(*_counted(conn, target, columns, "TRUE", 0), seconds)
        where = in_periods(event_time, [(start, end)])
        deleted = 0
        if not area.direct:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {target} AS SELECT * FROM {work} WITH NO DATA"
            )
            deleted = conn.execute(f"DELETE FROM {target} WHERE {where}").rowcount
            conn.execute(
                f"INSERT INTO {target} ({listed}) SELECT {listed} FROM {work} WHERE {where}"
            )
        return WriteResult(*_counted(conn, target, columns, where, deleted), seconds)


def _counted(
    conn: psycopg.Connection[Any], target: str, columns: list[str], where: str, deleted: int
) -> tuple[int, int, Any]:
    fp = fingerprint_where(conn, target, columns, where)
    return fp.rows, deleted, fp


def _split(relation: str) -> tuple[str, str]:
    """("schema", "name") of a quoted ``"schema"."name"``."""
    schema, _, name = relation.partition('"."')
    return schema.strip('"').replace('""', '"'), name.strip('"').replace('""', '"')


def drop_work(engine: PostgresEngine, backfill_id: str, prefix: str) -> None:
    """Drops the audit schema and dbt's work schemas (``prefix``, ``prefix_*``)."""
    with engine.connect() as conn:
        schemas = [
            r[0]
            for r in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname = %s OR nspname = %s OR "
                "starts_with(nspname, %s)",
                [audit_schema(backfill_id), prefix, prefix + "_"],
            )
        ]
        for schema in schemas:
            conn.execute(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE")
