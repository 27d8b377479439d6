"""What one SQL engine's SQL looks like: a :class:`Dialect` is everything the engine core
(:mod:`.core`) needs to write a statement for that engine, and nothing else.

A dialect is a small stateless object: quoting, literals, the period filter, the row-hash and
digest expressions of a fingerprint, the partition-index expression, the few aggregate spellings
that differ (distinct tuples, filtered counts), the statement refreshing planner statistics, the
type names of the changelog and of landed
Arrow columns, and which type names mean which :class:`~backfill.engines.base.ColumnKind`.
Everything here returns SQL text; nothing connects.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

from ..._numbers import Number
from ...calendar import PeriodSet
from ...errors import InvalidInputError
from ...model.rendering import sql_literal
from ..base import CHANGELOG_SCALE, Column, ColumnKind, Part, Period

__all__ = ["Dialect", "Rel"]

#: a relation of the warehouse: (schema, name)
Rel = tuple[str, str]


class Dialect:
    """The SQL of one engine; subclasses override what their engine spells differently."""

    name: ClassVar[str] = "sql"
    quote_char: ClassVar[str] = '"'
    #: base type name (lower case, without arguments) -> kind
    kinds: ClassVar[Mapping[str, ColumnKind]] = {}
    #: the changelog's column types (see backfill.engines.base.CHANGELOG_COLUMNS)
    changelog_types: ClassVar[Mapping[ColumnKind, str]] = {}
    #: Arrow type (its ``str()``) -> column type, for tables created from landed rows
    arrow_types: ClassVar[Mapping[str, str]] = {}
    #: up to this many partitions are told apart by a CASE expression (no join); more by a
    #: join with a VALUES list of their bounds (a CASE of thousands of branches compiles badly)
    case_parts: ClassVar[int] = 100
    #: whether the warehouse has SQL:2008 ``MERGE INTO`` (one statement upserts a merge model's
    #: rows); without it a merge deletes the matching keys and inserts
    merge_into: ClassVar[bool] = False
    #: the driver's parameter marker (its DB-API ``paramstyle``: ``qmark`` or ``format``)
    parameter: ClassVar[str] = "?"
    #: what follows the columns of a table the core creates (Spark: ``USING iceberg`` and the
    #: table's properties)
    table_options: ClassVar[str] = ""
    #: what ends a subquery so that the engine computes its columns once per row instead of
    #: inlining their expressions where the outer query reads them (Postgres: ``OFFSET 0``)
    fence: ClassVar[str] = ""
    #: whether ``ALTER TABLE ... ALTER COLUMN ... TYPE`` can make an approximate column exact
    #: (Iceberg cannot retype a double to a decimal: the old changelog's values stay doubles)
    retype_columns: ClassVar[bool] = True

    # -- names and literals ---------------------------------------------------------------------
    def quote(self, name: str) -> str:
        q = self.quote_char
        return q + name.replace(q, q + q) + q

    def qualified(self, rel: Rel) -> str:
        return f"{self.quote(rel[0])}.{self.quote(rel[1])}"

    def string(self, text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def literal(self, value: dt.datetime, kind: ColumnKind | None = None) -> str:
        """A period bound compared with a column of ``kind`` (a UTC instant)."""
        return sql_literal(value)

    def in_periods(
        self,
        column: str,
        periods: Sequence[Period],
        kind: ColumnKind | None = None,
        alias: str = "",
    ) -> str:
        """A filter on ``column`` for the union of ``periods`` (merged by the C++ PeriodSet);
        ``FALSE`` for none."""
        col = (f"{alias}." if alias else "") + self.quote(column)
        terms = (
            [
                f"({col} >= {self.literal(s, kind)} AND {col} < {self.literal(e, kind)})"
                for s, e in PeriodSet(list(periods)).intervals
            ]
            if periods
            else []
        )
        return "(" + " OR ".join(terms) + ")" if terms else "FALSE"

    def kind_of(self, type_name: str) -> ColumnKind:
        """The :class:`ColumnKind` of a type name such as ``DECIMAL(18,2)``."""
        text = type_name.strip().lower()
        if text.endswith("]") or text.startswith(("array", "_")):
            return ColumnKind.LIST
        return self.kinds.get(text.split("(")[0].split("<")[0].strip(), ColumnKind.OTHER)

    # -- fingerprints ---------------------------------------------------------------------------
    def row_hash(self, columns: Sequence[Column], alias: str) -> str:
        """A 64-bit hash of a row of ``columns`` of alias ``alias``; sorted names: independent
        of column order. An engine may choose its hash by the columns' types (PostgreSQL does):
        every fingerprint of a relation passes that relation's own columns, so fingerprints of
        the same rows in relations of the same types always agree."""
        raise NotImplementedError

    def legacy_row_hash(self, columns: Sequence[Column], alias: str) -> str | None:
        """The row hash of fingerprints recorded by earlier versions where it differs from
        :meth:`row_hash` for these columns (a publish re-checks those against it); None: the
        same hash."""
        return None

    def digest(self, row_hash: str) -> str:
        """The aggregate of row hashes that :meth:`PartitionFingerprint.of` reduces modulo 2^64
        (an integer, or its text)."""
        return f"coalesce(sum({row_hash}), 0)"

    def part_index(
        self, event_time: str, kind: ColumnKind | None, parts: Sequence[Part], alias: str = "t"
    ) -> tuple[str, str]:
        """(join clause, expression): the index in ``parts`` of a row of ``alias`` (rows are
        inside one of them)."""
        et = f"{alias}.{self.quote(event_time)}"
        if len(parts) <= self.case_parts:
            whens = " ".join(
                f"WHEN {et} >= {self.literal(s, kind)} AND {et} < {self.literal(e, kind)} THEN {i}"
                for i, (_, s, e) in enumerate(parts)
            )
            return "", f"CASE {whens} END"
        values = ", ".join(
            f"({i}, {self.literal(s, kind)}, {self.literal(e, kind)})"
            for i, (_, s, e) in enumerate(parts)
        )
        return (f" JOIN (VALUES {values}) AS p(i, s, e) ON {et} >= p.s AND {et} < p.e", "p.i")

    def parts_scan(
        self,
        source: str,
        columns: Sequence[Column],
        event_time: str,
        kind: ColumnKind | None,
        parts: Sequence[Part],
    ) -> str:
        """One scan of ``source`` (its ``columns``) whose rows are (index in ``parts``, row
        count, :meth:`digest`) for each of the partitions (none overlapping)
        holding rows: each row finds its partition by :meth:`part_index`, not by a join of
        every row against every partition."""
        join, index = self.part_index(event_time, kind, parts)
        where = self.in_periods(event_time, [(s, e) for _, s, e in parts], kind)
        h = self.digest(self.row_hash(columns, "t"))
        return (
            f"SELECT {index}, count(*), {h} FROM (SELECT * FROM {source} t0 WHERE {where}) t"
            f"{join} GROUP BY 1"
        )

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
        """One statement that runs :meth:`insert` of ``names`` from ``source`` into ``target``
        (a table of ``columns``) and returns what :meth:`parts_scan` of the table would for the
        rows it wrote -- (index in ``parts``, row count, :meth:`digest`) -- with the index NULL
        for rows outside every partition: the written rows fingerprinted as they are written,
        without reading the table again. None: the engine cannot (the table is scanned after)."""
        return None

    # -- the canonical row encoding (see .canonical; equal on every engine) ----------------------
    #: the SQL name of a 64-bit IEEE float, which the canonical float encoding computes in
    float_type: ClassVar[str] = "DOUBLE PRECISION"
    #: the SQL name of a text type without a length, which tokens are cast to
    text_type: ClassVar[str] = "VARCHAR"

    def canonical_hash64(self, text: str) -> str:
        """The first 64 bits of the MD5 digest of ``text``'s UTF-8 bytes, as an integer (signed
        or unsigned: digests are summed modulo 2^64, where both are the same number)."""
        raise NotImplementedError(f"the {self.name} dialect has no canonical row hash")

    def canonical_digest(self, text: str) -> str:
        """The aggregate of the canonical hashes of the row texts ``text`` that
        :meth:`PartitionFingerprint.of` reduces modulo 2^64: :meth:`digest` of
        :meth:`canonical_hash64` unless the engine sums them faster in pieces."""
        return self.digest(self.canonical_hash64(text))

    def exact_sum(self, value: str, integer: bool) -> str:
        """The exact sum of an integer or decimal ``value`` as text, every digit (DuckDB sums
        integers in HUGEINT and decimals in DECIMAL(38, s), PostgreSQL in numeric)."""
        return f"CAST(sum({value}) AS {self.text_type})"

    def canonical_byte_length(self, text: str) -> str:
        """The length of ``text`` in UTF-8 bytes (not characters: an engine that counted
        grapheme clusters would disagree with one counting code points)."""
        return f"octet_length({text})"

    def canonical_decimal(self, value: str) -> str:
        """The token of an exact number: its decimal text without trailing fractional zeros."""
        # The engine's decimal text (Spark's keeps every digit of the scale: 0.0000000000),
        # its trailing fractional zeros and point dropped; standard SQL spellings (Spark has no
        # strpos, and its two-argument rtrim takes the characters first).
        text = f"CAST({value} AS {self.text_type})"
        trimmed = f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {text}))"
        return f"CASE WHEN position('.' IN {text}) > 0 THEN {trimmed} ELSE {text} END"

    def canonical_epoch_us(self, value: str, kind: ColumnKind | None = None) -> str:
        """A timestamp (naive: read as UTC) as whole microseconds since 1970-01-01 UTC
        (``kind``: the column's, when known)."""
        raise NotImplementedError(f"the {self.name} dialect has no canonical timestamp")

    def canonical_is_nan(self, value: str) -> str:
        """Whether the float ``value`` is NaN (PostgreSQL orders NaN above every number and
        equal to itself, so ``= 'NaN'`` says it)."""
        return f"{value} = CAST('NaN' AS {self.float_type})"

    def canonical_is_finite(self, value: str) -> str:
        """Whether the float ``value`` is neither NaN nor infinite."""
        inf = f"CAST('Infinity' AS {self.float_type})"
        return f"({value} < {inf} AND {value} > -{inf})"

    def bytewise(self, value: str, kind: ColumnKind) -> str:
        """``value`` (a column of ``kind``) compared bytewise when it is a string: the order
        in which key ranges are cut (DuckDB's default collation is binary already)."""
        return value

    def canonical_days(self, value: str) -> str:
        """A date as whole days since 1970-01-01."""
        return f"CAST({value} - DATE '1970-01-01' AS BIGINT)"

    # -- aggregates that engines spell differently -----------------------------------------------
    def count_distinct(self, columns: Sequence[str]) -> str:
        return f"count(DISTINCT ({', '.join(columns)}))"

    def count_if(self, condition: str) -> str:
        return f"count(*) FILTER (WHERE {condition})"

    def as_instant(self, column: str) -> str:
        """``column`` (a date or timestamp read as UTC) as a UTC instant."""
        return f"CAST({column} AS TIMESTAMPTZ)"

    # -- statements ----------------------------------------------------------------------------
    def insert(self, target: str, source: str, columns: Sequence[str]) -> str:
        cols = ", ".join(self.quote(c) for c in columns)
        return f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {source}"

    def arrow_type(self, field: Any) -> str:
        """The column type of a table created for the Arrow field ``field`` (landed rows)."""
        name = str(field.type)
        if name.startswith("decimal"):  # decimal128(18, 2)
            return "DECIMAL" + name[name.index("(") :].replace(" ", "")
        if name not in self.arrow_types:
            raise InvalidInputError(
                f"landed column {field.name!r} of Arrow type {name}: expected one of "
                f"{', '.join(sorted(self.arrow_types))} or a decimal ({self.name} engine)"
            )
        return self.arrow_types[name]

    def changelog_type(self, kind: ColumnKind, column: str = "") -> str:
        """The type of a changelog column of ``kind`` (``column``: its name)."""
        return self.changelog_types.get(kind) or f"DECIMAL(38,{CHANGELOG_SCALE})"

    # -- declaratively partitioned tables (an engine with capabilities.table_partitions) -------
    def bound_literal(self, value: dt.date | dt.datetime) -> str:
        """A partition bound (a date, a naive UTC or an aware timestamp) as a literal that the
        column's type reads."""
        text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
        return self.string(text)

    def partitioned_table(self, target: str, like: str, column: str) -> str:
        """Creates ``target`` with the columns of ``like``, partitioned by range of ``column``."""
        raise NotImplementedError(f"the {self.name} dialect has no partitioned tables")

    def bounded_table(
        self,
        target: str,
        like: str,
        column: str,
        check: str,
        bounds: tuple[dt.date | dt.datetime, dt.date | dt.datetime],
    ) -> str:
        """Creates ``target`` with the columns of ``like`` and the CHECK constraint ``check``
        holding ``column`` inside ``bounds`` ([low, high), not NULL): the partition constraint
        of those bounds, which then needs no scan to be proven."""
        raise NotImplementedError(f"the {self.name} dialect has no partitioned tables")

    def attach_partition(
        self, parent: str, part: str, bounds: tuple[dt.date | dt.datetime, dt.date | dt.datetime]
    ) -> str:
        raise NotImplementedError(f"the {self.name} dialect has no partitioned tables")

    def detach_partition(self, parent: str, part: str) -> str:
        raise NotImplementedError(f"the {self.name} dialect has no partitioned tables")

    def move_table(self, table: str, schema: str) -> str:
        """Moves the table ``table`` into ``schema`` (its name stays)."""
        return f"ALTER TABLE {table} SET SCHEMA {self.quote(schema)}"

    def analyze(self, target: str) -> str | None:
        """The statement that refreshes the planner's statistics of the table ``target``; None
        for a warehouse that keeps them as it writes (DuckDB's row-group statistics, Iceberg's
        file metrics), which the engine core then leaves alone."""
        return None

    # -- values ---------------------------------------------------------------------------------
    def sum_value(self, value: Any, kind: ColumnKind | None) -> Number | None:
        """A measure's sum as the driver returned it, as the exact Python number of the
        column's kind (an int, a Decimal, a float)."""
        return cast("Number | None", value)

    def stream_column(self, column: Column, alias: str) -> str:
        """The SELECT list item streaming ``column`` to the diff as Arrow."""
        return f"{alias}.{self.quote(column.name)}"

    def stream_value(self, column: Column, alias: str) -> str:
        """The value :meth:`stream_column` streams, as an expression (a diff across engines
        sums measures in the engine as the diff would sum them streamed)."""
        return f"{alias}.{self.quote(column.name)}"
