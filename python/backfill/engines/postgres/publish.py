"""Publish on PostgreSQL: every model and the changelog rows in ONE transaction.

The transaction first takes a per-schema advisory lock (publishes of one schema run one at a
time) and ``SHARE ROW EXCLUSIVE`` locks on the published tables (in name order, so two publishes
cannot deadlock; readers are not blocked, writers wait), so nothing can change them between the
fingerprint check and the swap. Then every model's published fingerprints are compared with those
recorded at audit time, then each model is swapped in dependency order: ``replace`` deletes the
backfilled periods and inserts them from the audit area, ``merge`` runs MERGE on the unique key,
``full`` replaces the table, ``view`` re-creates the view over the published tables. Readers use
MVCC snapshots: a statement sees all old or all new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg

from ...errors import ConflictError
from ..base import (
    CHANGELOG_ADDED,
    CHANGELOG_COLUMNS,
    CHANGELOG_TABLE,
    PUBLISHED,
    ColumnKind,
    PublishModel,
    PublishRequest,
    StalePublishedError,
)
from .sql import fingerprint_parts, in_periods, qualified, quote, relation_kind, table_columns
from .writes import lock_relation, merge, replace_table

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project
    from .engine import PostgresEngine

__all__ = ["changelog_rows", "publish"]

# numeric without a type modifier keeps every digit of every measure value, at its own scale.
_TYPES = {
    ColumnKind.STRING: "text",
    ColumnKind.TIMESTAMP_TZ: "timestamptz",
    ColumnKind.INTEGER: "bigint",
    ColumnKind.FLOAT: "double precision",
    ColumnKind.DECIMAL: "numeric",
}


def publish(engine: PostgresEngine, project: Project, request: PublishRequest) -> None:
    views = {
        pm.model: engine.render(project, pm.model, None, None, PUBLISHED)
        for pm in request.models
        if project.models[pm.model].strategy == "view"
    }
    schema = engine.schema
    with engine.connect() as conn, conn.transaction():
        lock_relation(conn, schema, "backfill publish")
        tables = sorted(
            pm.model for pm in request.models if relation_kind(conn, schema, pm.model) == "table"
        )
        if tables:
            conn.execute(
                "LOCK TABLE "
                + ", ".join(qualified(schema, t) for t in tables)
                + " IN SHARE ROW EXCLUSIVE MODE"
            )
        # Every check before any swap: a published view reads tables swapped before it.
        for pm in request.models:
            stale = _stale(conn, engine, project, pm)
            if stale:
                raise StalePublishedError(pm.model, stale)
        for pm in request.models:
            if pm.model in views:
                _replace_view(conn, schema, pm.model, views[pm.model])
            else:
                _swap(conn, engine, project, request, pm)
        table = qualified(schema, CHANGELOG_TABLE)
        cols = ", ".join(f"{quote(n)} {_TYPES[k]}" for n, k in CHANGELOG_COLUMNS)
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
        _upgrade_changelog(conn, schema, table)
        if request.changelog:
            names = ", ".join(quote(n) for n, _ in CHANGELOG_COLUMNS)
            marks = ", ".join("%s" for _ in CHANGELOG_COLUMNS)
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table} ({names}) VALUES ({marks})",
                    [tuple(r) for r in request.changelog],
                )


def _upgrade_changelog(conn: psycopg.Connection[Any], schema: str, table: str) -> None:
    """Brings a changelog table of an earlier version up to date, in the publish's transaction:
    adds the columns added since, and makes double precision measure values numeric."""
    have = dict(
        conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s",
            [schema, CHANGELOG_TABLE],
        ).fetchall()
    )
    for name, kind in CHANGELOG_COLUMNS:
        if name in CHANGELOG_ADDED and name not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {quote(name)} {_TYPES[kind]}")
        elif kind == ColumnKind.DECIMAL and have.get(name) == "double precision":
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN {quote(name)} TYPE numeric")


def _stale(
    conn: psycopg.Connection[Any], engine: PostgresEngine, project: Project, pm: PublishModel
) -> list[str]:
    """Partitions whose published fingerprint differs from the one recorded at audit time."""
    pub = engine.published(pm.model)
    recorded = pm.published_fingerprints
    cols = table_columns(conn, *pub)
    if cols is None:
        return [label for label, fp in recorded.items() if not fp.startswith("0:")]
    now = fingerprint_parts(
        conn, qualified(*pub), [c.name for c in cols], project.models[pm.model].event_time, pm.parts
    )
    return [label for label in recorded if str(now.get(label)) != recorded[label]]


def _replace_view(conn: psycopg.Connection[Any], schema: str, name: str, sql: str) -> None:
    relation = qualified(schema, name)
    kind = relation_kind(conn, schema, name)
    if kind == "table":  # the model was a table, is now a view
        conn.execute(f"DROP TABLE {relation}")
    elif kind == "view":
        try:  # keeps views that depend on this one; fails when its columns change
            with conn.transaction():
                conn.execute(f"CREATE OR REPLACE VIEW {relation} AS {sql}")
            return
        except psycopg.errors.InvalidTableDefinition:
            conn.execute(f"DROP VIEW {relation}")
    conn.execute(f"CREATE VIEW {relation} AS {sql}")


def _swap(
    conn: psycopg.Connection[Any],
    engine: PostgresEngine,
    project: Project,
    request: PublishRequest,
    pm: PublishModel,
) -> None:
    m = project.models[pm.model]
    schema, name = engine.published(pm.model)
    pub = qualified(schema, name)
    new_rel = engine.relation(pm.model, request.area)
    new = qualified(*new_rel)
    new_cols = table_columns(conn, *new_rel) or []
    kind = relation_kind(conn, schema, name)
    if kind == "view":  # the model was a view, is now a table
        conn.execute(f"DROP VIEW {pub}")
        kind = None
    if kind is None or m.strategy == "full" or not pm.parts or not m.event_time:
        replace_table(conn, schema, name, new, [(c.name, c.type) for c in new_cols])
        return
    old_names = {c.name for c in table_columns(conn, schema, name) or []}
    new_names = [c.name for c in new_cols]
    if old_names != set(new_names):
        raise ConflictError(
            f"{pm.model}: the backfill changes its columns "
            f"({sorted(old_names ^ set(new_names))}); publishing some partitions "
            "cannot change a table's schema -- rebuild the model with strategy "
            "full"
        )
    if m.strategy == "merge" and m.unique_key:
        merge(conn, pub, new, new_names, m.unique_key)
        return
    periods = [(s, e) for _, s, e in pm.parts]
    cols = ", ".join(quote(n) for n in new_names)
    conn.execute(f"DELETE FROM {pub} WHERE {in_periods(m.event_time, periods)}")
    conn.execute(f"INSERT INTO {pub} ({cols}) SELECT {cols} FROM {new}")


def changelog_rows(engine: PostgresEngine, backfill_id: str | None) -> list[tuple[Any, ...]]:
    table = qualified(engine.schema, CHANGELOG_TABLE)
    with engine.connect() as conn:
        if relation_kind(conn, engine.schema, CHANGELOG_TABLE) is None:
            return []
        names = ", ".join(quote(n) for n, _ in CHANGELOG_COLUMNS)
        where = "WHERE backfill_id = %s" if backfill_id else ""
        rows = conn.execute(
            f"SELECT {names} FROM {table} {where} ORDER BY published_at DESC, "
            'model, "partition" NULLS FIRST, measure NULLS FIRST',
            [backfill_id] if backfill_id else [],
        ).fetchall()
    return [tuple(r) for r in rows]
