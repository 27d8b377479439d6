"""Spark SQL pieces of the Spark engine: quoting, typed period filters, column kinds, partition
transforms and in-engine fingerprints."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...calendar import PeriodSet
from ...errors import InvalidInputError
from ...model.files import sql_literal
from ..base import WHOLE, ColumnKind, Part, PartitionFingerprint, Period

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "arrow_rows",
    "fingerprint_parts",
    "in_periods",
    "kind_of",
    "part_index",
    "partition_transform",
    "quote",
    "row_hash",
]

_UTC = dt.timezone.utc


def quote(name: str) -> str:
    """A Spark SQL quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def _date_bound(value: dt.datetime) -> str:
    """The first date whose midnight (UTC) is at or after ``value``: ``d >= bound`` for a DATE
    column says the same as ``CAST(d AS TIMESTAMP) >= value``."""
    utc = value.astimezone(_UTC)
    day = utc.date()
    if utc.time() != dt.time(0):
        day += dt.timedelta(days=1)
    return f"DATE '{day.isoformat()}'"


def _literal(value: dt.datetime, kind: ColumnKind) -> str:
    if kind == ColumnKind.DATE:
        return _date_bound(value)
    if kind == ColumnKind.TIMESTAMP:  # TIMESTAMP_NTZ: wall-clock time read as UTC
        return sql_literal(value).replace("TIMESTAMP", "TIMESTAMP_NTZ", 1)
    return sql_literal(value)  # TIMESTAMP (an instant) in the session's UTC


def in_periods(column: str, periods: Sequence[Period], kind: ColumnKind) -> str:
    """A filter on ``column`` for the union of ``periods``, with literals of the column's own
    type so that Iceberg can push it down to partitions (an overwrite needs that: a filter on
    ``CAST(d AS TIMESTAMP)`` cannot delete files); ``FALSE`` for none."""
    col = quote(column)
    terms = (
        [
            f"({col} >= {_literal(s, kind)} AND {col} < {_literal(e, kind)})"
            for s, e in PeriodSet(list(periods)).intervals
        ]
        if periods
        else []
    )
    return "(" + " OR ".join(terms) + ")" if terms else "FALSE"


_KINDS = {
    **dict.fromkeys(
        ("tinyint", "smallint", "int", "integer", "bigint", "byte", "short", "long"),
        ColumnKind.INTEGER,
    ),
    "float": ColumnKind.FLOAT,
    "double": ColumnKind.FLOAT,
    "real": ColumnKind.FLOAT,
    "decimal": ColumnKind.DECIMAL,
    "string": ColumnKind.STRING,
    "varchar": ColumnKind.STRING,
    "char": ColumnKind.STRING,
    "boolean": ColumnKind.BOOLEAN,
    "date": ColumnKind.DATE,
    "timestamp": ColumnKind.TIMESTAMP_TZ,
    "timestamp_ltz": ColumnKind.TIMESTAMP_TZ,
    "timestamp_ntz": ColumnKind.TIMESTAMP,
    "array": ColumnKind.LIST,
}


def kind_of(type_name: str) -> ColumnKind:
    """The :class:`ColumnKind` of a Spark type name such as ``decimal(18,2)``."""
    base = type_name.strip().lower().split("(")[0].split("<")[0]
    return _KINDS.get(base, ColumnKind.OTHER)


#: grain -> Iceberg partition transform on the event time. A week or quarter is a union of
#: days: partitioning by day keeps every period overwrite file-aligned without adding a
#: computed column to the model's table (which the audit would see as a schema change).
_TRANSFORMS = {
    "hour": "hours",
    "day": "days",
    "week": "days",
    "month": "months",
    "quarter": "months",
    "year": "years",
}


def partition_transform(grain: str | None, event_time: str | None, kind: ColumnKind) -> str | None:
    """The Iceberg partition transform for a model (None: unpartitioned)."""
    if not grain or not event_time:
        return None
    transform = _TRANSFORMS.get(grain)
    if transform is None:
        raise InvalidInputError(f"grain {grain!r} has no Iceberg partition transform")
    if transform == "hours" and kind == ColumnKind.DATE:
        transform = "days"
    return f"{transform}({quote(event_time)})"


def arrow_rows(spark: SparkSession, sql: str) -> list[tuple[object, ...]]:
    """The rows of ``sql`` as tuples, through Arrow (timestamps come back as aware UTC
    datetimes, whatever this process's local time zone is)."""
    table = spark.sql(sql).toArrow()
    cols = [c.to_pylist() for c in table.columns]
    return list(zip(*cols)) if cols else []


def row_hash(names: Sequence[str], alias: str = "") -> str:
    # Sorted names: the digest does not depend on column order. Each value is paired with a
    # marker of its NULLness, since Spark's hash skips NULLs (a NULL in another column would
    # otherwise hash the same).
    cols = sorted(names)
    pre = f"{alias}." if alias else ""
    parts = [f"{pre}{quote(n)}, isnull({pre}{quote(n)})" for n in cols]
    return "xxhash64(" + ", ".join(parts) + ")"


def fingerprint_parts(
    spark: SparkSession,
    relation: str,
    names: Sequence[str],
    event_time: str | None,
    kind: ColumnKind,
    parts: Sequence[Part],
) -> dict[str, PartitionFingerprint]:
    """label -> fingerprint per (label, start, end) partition of ``relation`` (columns
    ``names``) on ``event_time``, in one Spark aggregate: row count and the sum of 64-bit row
    hashes modulo 2^64 (an order-independent digest). The whole relation under ``"all"`` when
    there are no partitions."""
    h = row_hash(names, "t")
    total = f"coalesce(sum(CAST({h} AS DECIMAL(38, 0))), 0)"
    if not parts or not event_time:
        rows = arrow_rows(spark, f"SELECT count(*), CAST({total} AS STRING) FROM {relation} t")
        n, d = rows[0]
        return {WHOLE: PartitionFingerprint.of(int(str(n)), int(str(d)))}
    join, index = part_index(event_time, kind, parts)
    where = in_periods(event_time, [(s, e) for _, s, e in parts], kind)
    rows = arrow_rows(
        spark,
        f"SELECT {index}, count(*), CAST({total} AS STRING) FROM (SELECT * FROM {relation} "
        f"WHERE {where}) t{join} GROUP BY 1",
    )
    by_i = {int(str(i)): PartitionFingerprint.of(int(str(n)), int(str(d))) for i, n, d in rows}
    return {
        label: by_i.get(i, PartitionFingerprint.empty()) for i, (label, _, _) in enumerate(parts)
    }


#: up to this many partitions are told apart by a CASE expression (no join, no broadcast); more
#: by a join with a VALUES list of their bounds (a CASE of thousands of branches compiles badly)
_CASE_PARTS = 100


def part_index(
    event_time: str | None, kind: ColumnKind, parts: Sequence[Part], alias: str = "t"
) -> tuple[str, str]:
    """(join clause, expression): the index in ``parts`` of a row of ``alias`` (rows must be
    inside one of them); ``("", "0")`` without partitions."""
    if not parts or not event_time:
        return "", "0"
    et = f"{alias}.{quote(event_time)}"
    if len(parts) <= _CASE_PARTS:
        whens = " ".join(
            f"WHEN {et} >= {_literal(s, kind)} AND {et} < {_literal(e, kind)} THEN {i}"
            for i, (_, s, e) in enumerate(parts)
        )
        return "", f"CASE {whens} END"
    values = ", ".join(
        f"({i}, {_literal(s, kind)}, {_literal(e, kind)})" for i, (_, s, e) in enumerate(parts)
    )
    return (f" JOIN (VALUES {values}) AS p(i, s, e) ON {et} >= p.s AND {et} < p.e", "p.i")
