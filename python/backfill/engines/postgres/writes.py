"""Writes shared by tasks and publish: advisory locks, whole-table replacement, MERGE."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from .sql import one, qualified, quote, relation_kind, table_columns

__all__ = ["drop_relation", "lock_relation", "merge", "replace_table"]


def lock_relation(conn: psycopg.Connection[Any], schema: str, name: str) -> None:
    """A transaction-scoped advisory lock on ``schema.name`` (released at commit/rollback)."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"backfill:{schema}.{name}"]
    )


def replace_table(
    conn: psycopg.Connection[Any],
    schema: str,
    name: str,
    source: str,
    source_columns: Sequence[tuple[str, str]],
) -> int:
    """Replaces the rows of ``schema.name`` with those of ``source`` (whose (name, type)
    columns are given) inside the caller's transaction; returns the rows removed. Same columns
    and types: DELETE + INSERT, so readers keep seeing the old rows until commit; otherwise the
    table is dropped and re-created."""
    target = qualified(schema, name)
    old = table_columns(conn, schema, name)
    if (
        old is not None
        and relation_kind(conn, schema, name) == "table"
        and sorted(source_columns) == sorted((c.name, c.type) for c in old)
    ):
        cols = ", ".join(quote(n) for n, _ in source_columns)
        removed = conn.execute(f"DELETE FROM {target}").rowcount
        conn.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {source}")
        return removed
    removed = one(conn, f"SELECT count(*) FROM {target}") if old is not None else 0
    drop_relation(conn, schema, name)
    conn.execute(f"CREATE TABLE {target} AS SELECT * FROM {source}")
    return removed


def merge(
    conn: psycopg.Connection[Any],
    target: str,
    source: str,
    columns: Sequence[str],
    keys: Sequence[str],
) -> int:
    """Upserts ``source`` into ``target`` on ``keys`` (MERGE); returns the rows replaced."""
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    matched = one(
        conn, f"SELECT count(*) FROM {target} t WHERE EXISTS (SELECT 1 FROM {source} s WHERE {on})"
    )
    sets = ", ".join(f"{quote(c)} = s.{quote(c)}" for c in columns if c not in keys)
    cols = ", ".join(quote(c) for c in columns)
    values = ", ".join(f"s.{quote(c)}" for c in columns)
    update = f"UPDATE SET {sets}" if sets else "DO NOTHING"
    conn.execute(
        f"MERGE INTO {target} t USING {source} s ON {on} WHEN MATCHED THEN {update} "
        f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({values})"
    )
    return matched


def drop_relation(conn: psycopg.Connection[Any], schema: str, name: str) -> None:
    kind = relation_kind(conn, schema, name)
    if kind is not None:
        conn.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {qualified(schema, name)}")
