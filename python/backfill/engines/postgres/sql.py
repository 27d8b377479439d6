"""PostgreSQL's SQL: the :class:`PostgresDialect` of the engine core."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from ..._numbers import Number, to_kind
from ..._numbers import kind_of as value_kind
from ...model.rendering import sql_literal
from ..base import Column, ColumnKind, Part
from ..sql.core import audit_schema
from ..sql.dialect import Dialect

__all__ = [
    "DIALECT",
    "EXTENDED_HASH_TYPES",
    "UNCONSTRAINED_SCALE",
    "PostgresDialect",
    "audit_schema",
    "extended_hash",
    "quote",
]

#: the scale an unconstrained ``numeric`` is streamed at (see :mod:`.arrow`)
UNCONSTRAINED_SCALE = 10


#: The built-in types (as ``format_type`` spells them, without a type modifier) whose default
#: hash operator class has an extended hash (support function 2; ``varchar`` and ``cidr`` use
#: those of ``text`` and ``inet``), and whose equality is that of their text: numbers compare
#: by value as the diff does (1.0 = 1.00). Left out: types without one (json, xml, point,
#: money, bit) and ``interval`` ('1 day' = '24 hours', texts that differ). Domains, enums,
#: composite and extension types are not looked up in the catalog: they keep the text hash.
EXTENDED_HASH_TYPES = frozenset(
    {
        "smallint",
        "integer",
        "bigint",
        "numeric",
        "real",
        "double precision",
        "text",
        "character varying",
        "character",
        '"char"',
        "name",
        "boolean",
        "date",
        "time without time zone",
        "time with time zone",
        "timestamp without time zone",
        "timestamp with time zone",
        "bytea",
        "uuid",
        "jsonb",
        "inet",
        "cidr",
        "macaddr",
        "macaddr8",
        "oid",
        "pg_lsn",
    }
)
_TYPMOD = re.compile(r"\(\d+(?:,\d+)?\)")


def extended_hash(type_name: str) -> bool:
    """Whether a column of ``type_name`` (``format_type``: ``numeric(18,2)``, ``integer[]``,
    ``timestamp(3) with time zone``) is hashed by :meth:`PostgresDialect.row_hash`'s
    ``hash_record_extended``: a type of :data:`EXTENDED_HASH_TYPES`, or an array of one."""
    base = _TYPMOD.sub("", type_name.strip())
    return base.removesuffix("[]") in EXTENDED_HASH_TYPES


class PostgresDialect(Dialect):
    name = "postgres"
    merge_into = True
    parameter = "%s"
    fence = " OFFSET 0"
    kinds: ClassVar = {
        **dict.fromkeys(("int2", "int4", "int8"), ColumnKind.INTEGER),
        **dict.fromkeys(("float4", "float8"), ColumnKind.FLOAT),
        "numeric": ColumnKind.DECIMAL,
        **dict.fromkeys(("text", "varchar", "bpchar", "name", "citext"), ColumnKind.STRING),
        "bool": ColumnKind.BOOLEAN,
        "date": ColumnKind.DATE,
        "timestamp": ColumnKind.TIMESTAMP,
        "timestamptz": ColumnKind.TIMESTAMP_TZ,
    }
    # numeric without a type modifier keeps every digit of every measure value, at its scale.
    changelog_types: ClassVar = {
        ColumnKind.STRING: "text",
        ColumnKind.TIMESTAMP_TZ: "timestamptz",
        ColumnKind.INTEGER: "bigint",
        ColumnKind.FLOAT: "double precision",
        ColumnKind.DECIMAL: "numeric",
    }
    arrow_types: ClassVar = {
        "int64": "bigint",
        "int32": "integer",
        "double": "double precision",
        "string": "text",
        "bool": "boolean",
        "timestamp[us]": "timestamp",
        "timestamp[us, tz=UTC]": "timestamptz",
        "date32[day]": "date",
        "binary": "bytea",
    }

    def row_hash(self, columns: Sequence[Column], alias: str) -> str:
        # hash_record_extended hashes each value by its type's hash function: no text of the
        # row (numeric_out, timestamp_out), a third of a fused INSERT's time at 4,000 orders a
        # day. Only where every column's type has an extended hash (json, point, xml, ...
        # have none: it fails at run time), decided from the types alone, so every fingerprint
        # of a table (written, scanned, audited, re-checked) takes the same hash; others keep
        # the text of the row. A bigint: sum() adds them in 128 bits, not in numeric.
        if all(extended_hash(c.type) for c in columns):
            return f"hash_record_extended({self._row(columns, alias)}, 0)"
        return self._text_hash(columns, alias)

    def legacy_row_hash(self, columns: Sequence[Column], alias: str) -> str | None:
        # Before 2026-12-07 every row was hashed by its text.
        if all(extended_hash(c.type) for c in columns):
            return self._text_hash(columns, alias)
        return None

    def _text_hash(self, columns: Sequence[Column], alias: str) -> str:
        # The row constructor's text marks NULL (empty) apart from an empty string ("").
        return f"hashtextextended({self._row(columns, alias)}::text, 0)"

    def _row(self, columns: Sequence[Column], alias: str) -> str:
        cols = ", ".join(f"{alias}.{self.quote(n)}" for n in sorted(c.name for c in columns))
        return f"ROW({cols})"

    float_type = "float8"

    def canonical_hash64(self, text: str) -> str:
        # The first 16 hex digits as a bit string, read as a (signed) bigint.
        return f"CAST(CAST('x' || substr(md5({text}), 1, 16) AS bit(64)) AS bigint)"

    def canonical_decimal(self, value: str) -> str:
        # trim_scale (PostgreSQL 13) drops the trailing zeros: 2.5x cheaper than trimming text.
        return f"CAST(trim_scale({value}) AS VARCHAR)"

    def canonical_epoch_us(self, value: str, kind: ColumnKind | None = None) -> str:
        if kind not in (ColumnKind.TIMESTAMP, ColumnKind.TIMESTAMP_TZ):
            # extract(epoch) is an exact numeric since PostgreSQL 14 (a naive timestamp as
            # UTC); timestamps hold whole microseconds, so the product is an integer.
            return f"CAST(extract(epoch FROM {value}) * 1000000 AS bigint)"
        # The same number without numeric arithmetic (2.4x cheaper): whole days, then the
        # microseconds of the day, whose seconds (< 86400, 6 decimals) a double holds closely
        # enough that rounding is exact.
        utc = f"({value} AT TIME ZONE 'UTC')" if kind == ColumnKind.TIMESTAMP_TZ else value
        return (
            f"(CAST(CAST({utc} AS date) - DATE '1970-01-01' AS bigint) * 86400000000"
            f" + CAST(round(date_part('epoch', CAST({utc} AS time)) * 1000000) AS bigint))"
        )

    def bytewise(self, value: str, kind: ColumnKind) -> str:
        # The database's collation (en_US.UTF-8...) orders strings unlike DuckDB and Python.
        return f'({value} COLLATE "C")' if kind == ColumnKind.STRING else value

    def part_index(
        self, event_time: str, kind: ColumnKind | None, parts: Sequence[Part], alias: str = "t"
    ) -> tuple[str, str]:
        # Binary search over the sorted starts (width_bucket): cost grows with the rows, not
        # rows x partitions. timestamptz reads as UTC wall time (the session's zone).
        order = sorted(range(len(parts)), key=lambda i: parts[i][1])
        starts = ", ".join(sql_literal(parts[i][1]) for i in order)
        et = f"{alias}.{self.quote(event_time)}::timestamp"
        index = f"ARRAY[{', '.join(str(i) for i in order)}]"
        return "", f"({index})[width_bucket({et}, ARRAY[{starts}]::timestamp[])]"

    def insert_fingerprinted(
        self,
        target: str,
        source: str,
        names: Sequence[str],
        columns: Sequence[Column],
        event_time: str,
        kind: ColumnKind | None,
        parts: Sequence[Part],
    ) -> str | None:
        # RETURNING gives the rows as stored (cast to the table's types), so their hashes are
        # those a scan of the table computes; a scan after each write read the whole table (no
        # index on the event time). Each row's partition and hash are computed in RETURNING:
        # the CTE then holds two numbers a row instead of the row, which spilled to a temporary
        # file past work_mem (a fifth of the statement's time at 4,000 orders a day).
        listed = ", ".join(self.quote(n) for n in names)
        _, index = self.part_index(event_time, kind, parts)
        inside = self.in_periods(event_time, [(s, e) for _, s, e in parts], kind, "t")
        return (
            f"WITH w AS (INSERT INTO {target} AS t ({listed}) SELECT {listed} FROM {source} "
            f"RETURNING CASE WHEN {inside} THEN {index} END AS p, "
            f"{self.row_hash(columns, 't')} AS h) "
            f"SELECT p, count(*), {self.digest('w.h')} FROM w GROUP BY 1"
        )

    def analyze(self, target: str) -> str:
        # Samples 300 x default_statistics_target rows (30,000): about constant time once a
        # table is larger than that many pages.
        return f"ANALYZE {target}"

    def partitioned_table(self, target: str, like: str, column: str) -> str:
        return f"CREATE TABLE {target} (LIKE {like}) PARTITION BY RANGE ({self.quote(column)})"

    def bounded_table(
        self,
        target: str,
        like: str,
        column: str,
        check: str,
        bounds: tuple[dt.date | dt.datetime, dt.date | dt.datetime],
    ) -> str:
        # The partition constraint of a range is "column IS NOT NULL AND column >= low AND
        # column < high": this CHECK is the same, so ATTACH proves it without a scan.
        c = self.quote(column)
        low, high = (self.bound_literal(b) for b in bounds)
        return (
            f"CREATE TABLE {target} (LIKE {like}, CONSTRAINT {self.quote(check)} "
            f"CHECK ({c} IS NOT NULL AND {c} >= {low} AND {c} < {high}))"
        )

    def attach_partition(
        self, parent: str, part: str, bounds: tuple[dt.date | dt.datetime, dt.date | dt.datetime]
    ) -> str:
        low, high = (self.bound_literal(b) for b in bounds)
        return f"ALTER TABLE {parent} ATTACH PARTITION {part} FOR VALUES FROM ({low}) TO ({high})"

    def detach_partition(self, parent: str, part: str) -> str:
        # Not CONCURRENTLY: that cannot run inside the publish's transaction.
        return f"ALTER TABLE {parent} DETACH PARTITION {part}"

    def count_distinct(self, columns: Sequence[str]) -> str:
        return f"count(DISTINCT ROW({', '.join(columns)}))"

    def sum_value(self, value: Any, kind: ColumnKind | None) -> Number | None:
        # sum(numeric) is numeric (Decimal, exact); sum(bigint) is numeric too, made an int
        # again for integer columns; float columns sum to float8.
        return to_kind(value, kind.value if kind is not None else value_kind(value))

    def stream_column(self, column: Column, alias: str) -> str:
        return f"{self.stream_value(column, alias)} AS {self.quote(column.name)}"

    def stream_value(self, column: Column, alias: str) -> str:
        # An unconstrained numeric has no fixed scale: rounded, it arrives as decimal128(38, 10).
        col = f"{alias}.{self.quote(column.name)}"
        if column.kind == ColumnKind.DECIMAL and column.type == "numeric":
            return f"round({col}, {UNCONSTRAINED_SCALE})"
        return col


DIALECT = PostgresDialect()
quote = DIALECT.quote
