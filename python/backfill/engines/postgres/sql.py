"""PostgreSQL SQL of the Postgres engine: quoting, catalog look-ups, period filters, column kinds
and fingerprints computed in the database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ...calendar import PeriodSet
from ...model.files import sql_literal
from ..base import WHOLE, ColumnKind, Part, PartitionFingerprint, Period

__all__ = [
    "TableColumn",
    "audit_schema",
    "fingerprint_parts",
    "fingerprint_where",
    "in_periods",
    "kind_of",
    "one",
    "qualified",
    "quote",
    "relation_kind",
    "table_columns",
]


def quote(name: str) -> str:
    """A quoted identifier (any name is safe: quotes are doubled)."""
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, name: str) -> str:
    return f"{quote(schema)}.{quote(name)}"


def audit_schema(backfill_id: str) -> str:
    """The schema of a backfill's (or scratch) audit area."""
    return f"audit_{backfill_id}"


def one(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any] = ()) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def relation_kind(conn: psycopg.Connection[Any], schema: str, name: str) -> str | None:
    """``"table"``, ``"view"`` or None, from the catalog (safe inside a transaction)."""
    row = conn.execute(
        "SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p', 'v', 'm')",
        [schema, name],
    ).fetchone()
    if row is None:
        return None
    return "view" if row[0] in ("v", "m") else "table"


@dataclass(frozen=True)
class TableColumn:
    name: str
    type: str  # format_type(), e.g. "numeric(18,2)"
    kind: ColumnKind
    typmod: int


def table_columns(
    conn: psycopg.Connection[Any], schema: str, name: str
) -> list[TableColumn] | None:
    """The columns of ``schema.name`` in table order; None when there is no such relation."""
    rows = conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typname, t.typcategory, "
        "a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        [schema, name],
    ).fetchall()
    if not rows:
        return None if relation_kind(conn, schema, name) is None else []
    return [
        TableColumn(str(r[0]), str(r[1]), kind_of(str(r[2]), str(r[3])), int(r[4])) for r in rows
    ]


_KINDS = {
    **dict.fromkeys(("int2", "int4", "int8"), ColumnKind.INTEGER),
    **dict.fromkeys(("float4", "float8"), ColumnKind.FLOAT),
    "numeric": ColumnKind.DECIMAL,
    **dict.fromkeys(("text", "varchar", "bpchar", "name", "citext"), ColumnKind.STRING),
    "bool": ColumnKind.BOOLEAN,
    "date": ColumnKind.DATE,
    "timestamp": ColumnKind.TIMESTAMP,
    "timestamptz": ColumnKind.TIMESTAMP_TZ,
}


def kind_of(typname: str, category: str = "") -> ColumnKind:
    """The :class:`ColumnKind` of a Postgres type (``pg_type.typname`` and ``typcategory``)."""
    if category == "A" or typname.startswith("_"):
        return ColumnKind.LIST
    return _KINDS.get(typname, ColumnKind.OTHER)


def in_periods(column: str, periods: Sequence[Period], alias: str = "") -> str:
    """A filter on ``column`` for the union of ``periods`` (merged by the C++ PeriodSet);
    ``FALSE`` for none. The literals are UTC timestamps; the session's zone is UTC."""
    col = (f"{alias}." if alias else "") + quote(column)
    terms = (
        [
            f"({col} >= {sql_literal(s)} AND {col} < {sql_literal(e)})"
            for s, e in PeriodSet(list(periods)).intervals
        ]
        if periods
        else []
    )
    return "(" + " OR ".join(terms) + ")" if terms else "FALSE"


def _row_hash(columns: Sequence[str], alias: str) -> str:
    """A signed 64-bit hash of a row's text form. Sorted names: independent of column order;
    the row constructor's text marks NULL (empty) apart from an empty string (``""``)."""
    cols = ", ".join(f"{alias}.{quote(n)}" for n in sorted(columns))
    return f"hashtextextended(ROW({cols})::text, 0)::numeric"


def fingerprint_where(
    conn: psycopg.Connection[Any], source: str, columns: Sequence[str], where: str = "TRUE"
) -> PartitionFingerprint:
    """Fingerprint of the rows of ``source`` (a relation or parenthesized query) matching
    ``where``: row count and the sum of the row hashes (modulo 2^64 in PartitionFingerprint)."""
    row = conn.execute(
        f"SELECT count(*), coalesce(sum({_row_hash(columns, 't')}), 0) FROM {source} t "
        f"WHERE {where}"
    ).fetchone()
    assert row is not None
    return PartitionFingerprint.of(row[0], int(row[1]))


def fingerprint_parts(
    conn: psycopg.Connection[Any],
    source: str,
    columns: Sequence[str],
    event_time: str | None,
    parts: Sequence[Part],
) -> dict[str, PartitionFingerprint]:
    """label -> fingerprint per (label, start, end) partition of ``source`` on ``event_time``
    in one scan; the whole relation under ``"all"`` when there are no partitions.

    Each row finds its partition by binary search over the sorted starts (``width_bucket``)
    rather than by a join against every partition: cost grows with the rows, not rows x
    partitions."""
    if not parts or not event_time:
        return {WHOLE: fingerprint_where(conn, source, columns)}
    ordered = sorted(range(len(parts)), key=lambda i: parts[i][1])
    starts = [parts[i][1] for i in ordered]
    ends = [parts[i][2] for i in ordered]
    if any(ends[i] > starts[i + 1] for i in range(len(starts) - 1)):  # overlapping: one by one
        return {
            label: fingerprint_where(conn, source, columns, in_periods(event_time, [(s, e)]))
            for label, s, e in parts
        }
    raw = f"t.{quote(event_time)}"
    et = f"{raw}::timestamp"  # timestamptz as UTC wall time (the session's zone), dates at 0:00
    s_arr = "ARRAY[" + ", ".join(sql_literal(s) for s in starts) + "]::timestamp[]"
    e_arr = "ARRAY[" + ", ".join(sql_literal(e) for e in ends) + "]::timestamp[]"
    rows = conn.execute(
        f"SELECT b, count(*), sum(h) FROM (SELECT width_bucket({et}, {s_arr}) AS b, {et} AS ts, "
        f"{_row_hash(columns, 't')} AS h FROM {source} t WHERE {raw} >= {sql_literal(starts[0])} "
        f"AND {raw} < {sql_literal(max(ends))}) x WHERE b > 0 AND ts < ({e_arr})[b] "
        "GROUP BY b"
    ).fetchall()
    found = {int(b): PartitionFingerprint.of(n, int(d)) for b, n, d in rows}
    empty = PartitionFingerprint.empty()
    return {parts[i][0]: found.get(pos + 1, empty) for pos, i in enumerate(ordered)}
