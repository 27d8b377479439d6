"""Publish on DuckDB: every model and the changelog rows in ONE transaction.

Inside the transaction, first every model's published fingerprints are compared with those
recorded at audit time (so nothing can slip in between the check and the swap), then each model
is swapped in dependency order: ``replace`` deletes the backfilled periods and inserts them from
the audit area, ``merge`` upserts on the unique key, ``full`` replaces the table, ``view``
re-creates the view over the published tables with the backfill's definition (rendered before
the transaction). Readers use snapshot isolation: all old or all new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb

from ...errors import ConflictError
from ..base import (
    CHANGELOG_ADDED,
    CHANGELOG_COLUMNS,
    CHANGELOG_SCALE,
    CHANGELOG_TABLE,
    PUBLISHED,
    ColumnKind,
    PartitionFingerprint,
    PublishModel,
    PublishRequest,
    StalePublishedError,
)
from .sql import (
    fingerprint_parts,
    fingerprint_where,
    in_periods,
    quote,
    relation_exists,
    relation_kind,
    transaction,
)

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project
    from .engine import DuckDBEngine

__all__ = ["changelog_rows", "publish"]

_TYPES = {
    ColumnKind.STRING: "VARCHAR",
    ColumnKind.TIMESTAMP_TZ: "TIMESTAMPTZ",
    ColumnKind.INTEGER: "BIGINT",
    ColumnKind.FLOAT: "DOUBLE",
    ColumnKind.DECIMAL: f"DECIMAL(38,{CHANGELOG_SCALE})",
}
# Counts of partitions are INTEGER in the table's first version; kept for existing warehouses.
_NARROW = {"partitions": "INTEGER"}


def _changelog_table(engine: DuckDBEngine) -> str:
    return f"{quote(engine.schema)}.{quote(CHANGELOG_TABLE)}"


def publish(engine: DuckDBEngine, project: Project, request: PublishRequest) -> None:
    views = {
        pm.model: engine.render(project, pm.model, None, None, PUBLISHED)
        for pm in request.models
        if project.models[pm.model].strategy == "view"
    }
    with engine.connect() as cur, transaction(cur):
        # Every check before any swap: a published view reads tables swapped before it.
        for pm in request.models:
            stale = _stale(cur, engine, project, pm)
            if stale:
                raise StalePublishedError(pm.model, stale)
        for pm in request.models:
            if pm.model in views:
                _replace_view(cur, engine.published(pm.model, project), views[pm.model])
            else:
                _swap(cur, engine, project, request, pm)
        table = _changelog_table(engine)
        cols = ", ".join(f"{quote(n)} {_NARROW.get(n, _TYPES[k])}" for n, k in CHANGELOG_COLUMNS)
        cur.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
        _upgrade_changelog(cur, engine, table)
        if request.changelog:
            names = ", ".join(quote(n) for n, _ in CHANGELOG_COLUMNS)
            marks = ", ".join("?" for _ in CHANGELOG_COLUMNS)
            cur.executemany(
                f"INSERT INTO {table} ({names}) VALUES ({marks})", list(request.changelog)
            )


def _upgrade_changelog(cur: duckdb.DuckDBPyConnection, engine: DuckDBEngine, table: str) -> None:
    """Brings a changelog table of an earlier version up to date, in the publish's transaction:
    adds the columns added since, and makes DOUBLE measure values exact decimals."""
    have = {
        r[0]: r[1]
        for r in cur.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = ? AND table_name = ?",
            [engine.schema, CHANGELOG_TABLE],
        ).fetchall()
    }
    for name, kind in CHANGELOG_COLUMNS:
        if name in CHANGELOG_ADDED and name not in have:
            cur.execute(f"ALTER TABLE {table} ADD COLUMN {quote(name)} {_TYPES[kind]}")
        elif kind == ColumnKind.DECIMAL and have.get(name) == "DOUBLE":
            cur.execute(f"ALTER TABLE {table} ALTER {quote(name)} TYPE {_TYPES[kind]}")


def _stale(
    cur: duckdb.DuckDBPyConnection, engine: DuckDBEngine, project: Project, pm: PublishModel
) -> list[str]:
    """Partitions whose published fingerprint differs from the one recorded at audit time."""
    pub = engine.published(pm.model, project)
    recorded = pm.published_fingerprints
    if not relation_exists(cur, pub):
        return [label for label, fp in recorded.items() if not fp.startswith("0:")]
    event_time = project.models[pm.model].event_time
    if event_time and len(pm.parts) > 1 and set(recorded) == {p[0] for p in pm.parts}:
        # One filtered scan of the backfilled periods (zone maps skip the rest of the table)
        # against the sum of the recorded fingerprints: equal unless a partition changed (up to
        # a hash collision, as any fingerprint). Only a mismatch pays the per-partition scan,
        # which names the partitions.
        total = fingerprint_where(
            cur, pub, in_periods(event_time, [(s, e) for _, s, e in pm.parts])
        )
        if total == PartitionFingerprint.total(recorded.values()):
            return []
    now = fingerprint_parts(cur, pub, event_time, pm.parts)
    return [label for label in recorded if str(now.get(label)) != recorded[label]]


def _replace_view(cur: duckdb.DuckDBPyConnection, relation: str, sql: str) -> None:
    if relation_kind(cur, relation) == "table":  # the model was a table, is now a view
        cur.execute(f"DROP TABLE {relation}")
    cur.execute(f"CREATE OR REPLACE VIEW {relation} AS {sql}")


def _swap(
    cur: duckdb.DuckDBPyConnection,
    engine: DuckDBEngine,
    project: Project,
    request: PublishRequest,
    pm: PublishModel,
) -> None:
    m = project.models[pm.model]
    pub = engine.published(pm.model, project)
    new = engine.relation(pm.model, request.area, project)
    if relation_kind(cur, pub) == "view":  # the model was a view, is now a table
        cur.execute(f"DROP VIEW {pub}")
    if not relation_exists(cur, pub) or m.strategy == "full" or not pm.parts or not m.event_time:
        cur.execute(f"CREATE OR REPLACE TABLE {pub} AS SELECT * FROM {new}")
        return
    old_cols = {r[0] for r in cur.execute(f"DESCRIBE {pub}").fetchall()}
    new_cols = {r[0] for r in cur.execute(f"DESCRIBE {new}").fetchall()}
    if old_cols != new_cols:
        raise ConflictError(
            f"{pm.model}: the backfill changes its columns "
            f"({sorted(new_cols ^ old_cols)}); publishing some partitions cannot "
            "change a table's schema -- rebuild the model with strategy full"
        )
    if m.strategy == "merge" and m.unique_key:
        keys = ", ".join(quote(k) for k in m.unique_key)
        cur.execute(f"DELETE FROM {pub} WHERE ({keys}) IN (SELECT ({keys}) FROM {new})")
    else:
        periods = [(s, e) for _, s, e in pm.parts]
        cur.execute(f"DELETE FROM {pub} WHERE {in_periods(m.event_time, periods)}")
    cur.execute(f"INSERT INTO {pub} BY NAME SELECT * FROM {new}")


def changelog_rows(engine: DuckDBEngine, backfill_id: str | None) -> list[tuple[Any, ...]]:
    table = _changelog_table(engine)
    with engine.connect() as cur:
        if not relation_exists(cur, table):
            rows: list[tuple[Any, ...]] = []
        else:
            where = "WHERE backfill_id = ?" if backfill_id else ""
            names = ", ".join(quote(n) for n, _ in CHANGELOG_COLUMNS)
            rows = cur.execute(
                f"SELECT {names} FROM {table} {where} ORDER BY published_at DESC, "
                "model, partition NULLS FIRST, measure NULLS FIRST",
                [backfill_id] if backfill_id else [],
            ).fetchall()
    engine.close()
    return rows
