"""The canonical row encoding: one 64-bit hash per logical row, computed in SQL, equal on every
engine that holds the same row (DuckDB, PostgreSQL, Parquet read through DuckDB, Spark on
Iceberg), so that two
warehouses can compare a segment of a table by its fingerprint before sending a single row.

The engines' own fingerprints (:meth:`Dialect.row_hash`: DuckDB's ``hash()``, Postgres's
``hashtextextended`` of a row's text) compare a table only with itself on the same engine; this
one is slower (an MD5 per row) and the same everywhere. Its definition:

* A row is the values of the compared columns in the order of their names (sorted, so column
  order does not matter), each turned into a *token*, joined by ``|``; its hash is the first 64
  bits (16 hex digits) of the MD5 of that text's UTF-8 bytes, read as an integer. A segment's
  fingerprint is its row count and the sum of its rows' hashes modulo 2^64
  (:class:`~backfill.fingerprints.PartitionFingerprint`), as the engines' fingerprints are:
  independent of row order, counting duplicates.
* ``NULL`` of any type is ``~``, which no other token is.
* **Integers and decimals** (any width, any scale) are one class, *exact numbers*, whose token
  is the decimal text without trailing fractional zeros: ``1.50`` in ``numeric(18,2)``, ``1.5``
  in ``decimal(10,1)`` and ``1.500`` in ``DECIMAL(38,3)`` are all ``1.5``; ``2.00`` and the
  integer ``2`` are both ``2``. A value is equal to itself whatever column type holds it; a
  change of type alone is reported by the schema comparison, not as changed values.
* **Floats** (single precision is widened to double, which is exact) are encoded exactly, as
  their binary value: ``[-]M p K`` for ``|x| = M * 2^K`` with the integer ``M < 2^53`` and ``K``
  chosen as IEEE 754 does (``K = max(e, -1022) - 52`` for the binary exponent ``e``), so
  ``0.1`` is ``3602879701896397p-55``; ``inf`` and ``-inf``. Two floats the diff takes as
  equal have one token: ``0.0`` and ``-0.0`` are both ``0``, and every NaN (either sign, any
  payload) is ``nan``, on every engine. (A Parquet file's float min/max leave its NaNs out;
  DuckDB reads Parquet with ``can_have_nan`` so that its optimizer does not fold ``isnan`` to
  false from them: :func:`backfill.engines.duckdb.tables.parquet_relation`.)
  Not the engines' float text: DuckDB and Postgres print the same double differently (``1e+15``
  against ``1000000000000000.0``, even different digits: ``3.092535278770144e+18`` against
  ``3.0925352787701443e+18``), and not a rounding to N significant digits either: a rounding
  would give two values that differ beyond a zero tolerance the same token (equal fingerprints,
  the difference never seen), and values within a tolerance can still straddle a rounding
  boundary. Exact tokens are sound for every tolerance: equal fingerprints mean equal floats;
  a segment whose floats differ only within the tolerance has unequal fingerprints, is streamed,
  and the C++ diff applies the tolerance to its rows (the cost of such a segment is its rows,
  the result is the same). ``M`` and ``K`` are computed with ``ln``, ``power(2, k)`` and
  division by powers of two, which are exact (``ln`` only guesses the exponent, which is then
  corrected by comparing with exact powers of two).
* **Timestamps**, with or without time zone and of any precision: whole microseconds since
  1970-01-01 UTC (a timestamp without zone is read as UTC wall time, as the engines' period
  filters read it; finer digits, such as DuckDB's ``TIMESTAMP_NS``, are dropped: PostgreSQL
  cannot hold them). A column with a zone on one side and without on the other compares as
  instants, noted in the column report.
* **Dates**: whole days since 1970-01-01.
* **Strings**: ``<length in UTF-8 bytes>:<the string>``, so a ``|`` or ``~`` inside a string
  cannot make two rows' texts equal.
* **Booleans**: ``t`` and ``f``.

A column of another type (lists, structs, blobs, JSON, UUID) has no token: the column must be left
out (``columns=``), and the error naming it says so. Two sides whose types fall in different
classes compare as follows: an exact number against a float is compared as floats (the exact side
cast to double: ``numeric(18,2)`` against ``double``), reported per column as such; any other pair
(a string against a number, a date against a timestamp) is not compared and is reported per
column.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import InvalidInputError
from ..base import Column, ColumnKind, Part, Period
from .dialect import Dialect

__all__ = [
    "NULL_TOKEN",
    "Encoded",
    "Encoding",
    "Summed",
    "bounds_scan",
    "compare_as",
    "duplicate_key_scan",
    "encoding_of",
    "filtered",
    "in_periods",
    "instant_bounds_scan",
    "row_hash",
    "row_text",
    "segments_scan",
    "streamed_value",
    "token",
]

NULL_TOKEN = "~"
SEPARATOR = "|"


class Encoding(str, enum.Enum):
    """The class of values a token encodes (see the module's documentation)."""

    EXACT = "exact"
    FLOAT = "float"
    STRING = "string"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"


_OF_KIND = {
    ColumnKind.INTEGER: Encoding.EXACT,
    ColumnKind.DECIMAL: Encoding.EXACT,
    ColumnKind.FLOAT: Encoding.FLOAT,
    ColumnKind.STRING: Encoding.STRING,
    ColumnKind.BOOLEAN: Encoding.BOOLEAN,
    ColumnKind.DATE: Encoding.DATE,
    ColumnKind.TIMESTAMP: Encoding.TIMESTAMP,
    ColumnKind.TIMESTAMP_TZ: Encoding.TIMESTAMP,
}


def encoding_of(column: Column) -> Encoding | None:
    """The token class of ``column``'s values; None for a type without one."""
    return _OF_KIND.get(column.kind)


def compare_as(a: Column, b: Column) -> tuple[Encoding | None, str]:
    """How two sides' columns of one name compare: (the encoding both use, a note for the
    column report); (None, why) when they cannot be compared."""
    ea, eb = encoding_of(a), encoding_of(b)
    if ea is None or eb is None:
        odd = a if ea is None else b
        return None, f"type {odd.type} has no canonical encoding"
    if ea == eb:
        note = "" if a.kind == b.kind else f"compared as {ea.value} ({a.type} vs {b.type})"
        return ea, note
    if {ea, eb} == {Encoding.EXACT, Encoding.FLOAT}:
        return Encoding.FLOAT, f"compared as float ({a.type} vs {b.type})"
    return None, f"types {a.type} and {b.type} cannot be compared"


@dataclass(frozen=True)
class Encoded:
    """A column as a row hash encodes it: its name, the encoding its token uses and, when
    known, the column's kind on the side that computes it (the same token then takes a
    cheaper expression: an integer needs no trimming of fractional zeros)."""

    name: str
    encoding: Encoding
    kind: ColumnKind | None = None


def _float_token(d: Dialect, value: str) -> str:
    """The exact token of a float: ``[-]MpK`` with ``|x| = M * 2^K``."""
    x = f"CAST({value} AS {d.float_type})"
    # The arithmetic runs on a finite non-zero stand-in: an engine may evaluate a CASE branch on
    # rows it does not select (DuckDB did for NaN, failing the cast to BIGINT); those rows take
    # the earlier branches' tokens.
    a = f"abs(CASE WHEN {x} <> 0 AND {d.canonical_is_finite(x)} THEN {x} ELSE 1 END)"

    def power(k: str) -> str:
        return f"power(CAST(2 AS {d.float_type}), {k})"

    # ln() guesses the binary exponent (it may be off by one either way; clamped to the range of
    # representable powers of two, so power() never overflows); exact comparisons with powers
    # of two correct it.
    guess = f"least(greatest(floor(ln({a}) / ln(2)), -1074), 1023)"
    exp = (
        f"({guess} - CASE WHEN {a} < {power(guess)} THEN 1 ELSE 0 END"
        f" + CASE WHEN {a} / {power(guess)} >= 2 THEN 1 ELSE 0 END)"
    )
    k = f"(greatest({exp}, -1022) - 52)"
    mantissa = f"CAST(CAST({a} / {power(k)} AS BIGINT) AS {d.text_type})"
    return (
        f"CASE WHEN {x} IS NULL THEN '{NULL_TOKEN}'"
        f" WHEN {d.canonical_is_nan(x)} THEN 'nan'"
        f" WHEN NOT {d.canonical_is_finite(x)} THEN CASE WHEN {x} > 0 THEN 'inf' ELSE '-inf' END"
        f" WHEN {x} = 0 THEN '0'"
        f" ELSE CASE WHEN {x} < 0 THEN '-' ELSE '' END || {mantissa} || 'p'"
        f" || CAST(CAST({k} AS BIGINT) AS {d.text_type}) END"
    )


def token(d: Dialect, value: str, encoding: Encoding, kind: ColumnKind | None = None) -> str:
    """The SQL expression of the token of ``value`` (a column expression of ``kind``, when
    known) encoded as ``encoding``: text, never NULL."""
    if encoding == Encoding.FLOAT:
        return _float_token(d, value)
    if encoding == Encoding.EXACT and kind == ColumnKind.INTEGER:
        body = f"CAST({value} AS {d.text_type})"
    elif encoding == Encoding.EXACT:
        body = d.canonical_decimal(value)
    elif encoding == Encoding.STRING:
        body = f"CAST({d.canonical_byte_length(value)} AS {d.text_type}) || ':' || {value}"
    elif encoding == Encoding.BOOLEAN:
        body = f"CASE WHEN {value} THEN 't' WHEN NOT {value} THEN 'f' END"
    elif encoding == Encoding.DATE:
        body = f"CAST({d.canonical_days(value)} AS {d.text_type})"
    else:
        body = f"CAST({d.canonical_epoch_us(value, kind)} AS {d.text_type})"
    # Every body is NULL exactly when the value is: coalesce is cheaper than a CASE (DuckDB).
    return f"coalesce({body}, '{NULL_TOKEN}')"


def row_text(d: Dialect, columns: Sequence[Encoded], alias: str) -> str:
    """The canonical text of a row of ``alias`` over ``columns``: their tokens in name order,
    joined by ``|`` (what a row's hash is the MD5 of)."""
    if not columns:
        raise InvalidInputError("a canonical row hash needs at least one column")
    prefix = f"{alias}." if alias else ""
    tokens = [
        token(d, prefix + d.quote(c.name), c.encoding, c.kind)
        for c in sorted(columns, key=lambda c: c.name)
    ]
    # concat_ws: one function over the tokens (none NULL), cheaper than a chain of || (DuckDB).
    return f"concat_ws('{SEPARATOR}', {', '.join(tokens)})"


def row_hash(d: Dialect, columns: Sequence[Encoded], alias: str) -> str:
    """The canonical 64-bit hash of a row of ``alias`` over ``columns`` (in name order)."""
    return d.canonical_hash64(row_text(d, columns, alias))


@dataclass(frozen=True)
class Summed:
    """A measure a segment scan sums: ``expression``, the value as it is streamed to the diff
    (:func:`streamed_value`, over alias ``t``), so that a segment's sum is the sum the diff
    would compute of its streamed rows; ``exact`` (integers and decimals) sums are read back as
    text, every digit (DuckDB's HUGEINT and DECIMAL(38, s), PostgreSQL's numeric), float sums as
    the engine's double."""

    expression: str
    exact: bool
    #: an integer measure (its exact sum may leave 64 bits: :meth:`Dialect.exact_sum`)
    integer: bool = False


def streamed_value(d: Dialect, column: Column, cast: str | None, alias: str = "t") -> str:
    """The value of ``column`` as the diff receives it: cast to ``"float"`` or ``"bigint"`` (one
    Arrow type on both sides), or as the dialect streams it (PostgreSQL rounds an unconstrained
    numeric to a fixed scale)."""
    if cast is None:
        return d.stream_value(column, alias)
    target = d.float_type if cast == "float" else "BIGINT"
    return f"CAST({alias}.{d.quote(column.name)} AS {target})"


def segments_scan(
    d: Dialect,
    relation: str,
    columns: Sequence[Encoded],
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    sums: Sequence[Summed] = (),
    key: Sequence[str] = (),
) -> str:
    """One scan of ``relation`` whose rows are (segment, row count, digest, the sum of each of
    ``sums``...): the segment is the index in ``parts`` of the partition of the row's
    ``partition`` column (-1 for rows whose value is NULL; 0 for every row without
    ``partition``). A sum over no value is NULL. Rows with a NULL in a column of ``key`` are
    left out of the count and digest (a diff cannot match them: they are streamed whatever the
    fingerprints say); the sums are of every row of the segment, so that a segment whose rows
    are streamed only in part (key ranges, NULL keys) still has its whole sums. A segment
    holding only rows with a NULL key has a count of 0."""
    keyed = "".join(f" AND t.{d.quote(k)} IS NOT NULL" for k in key)
    text = row_text(d, columns, "t")
    if key and sums:
        # Every row is summed: the key filter moves into the count and the digest (a NULL text
        # has a NULL hash, which no sum counts).
        has_key = " AND ".join(f"t.{d.quote(k)} IS NOT NULL" for k in key)
        count = f"count(CASE WHEN {has_key} THEN 1 END)"
        digest = d.canonical_digest(f"CASE WHEN {has_key} THEN {text} END")
        keyed = ""
    else:
        count, digest = "count(*)", d.canonical_digest(text)
    aggregates = ", ".join(
        [
            count,
            digest,
            *(
                d.exact_sum(s.expression, s.integer) if s.exact else f"sum({s.expression})"
                for s in sums
            ),
        ]
    )
    if partition is None or not parts:
        return f"SELECT 0, {aggregates} FROM {relation} t WHERE TRUE{keyed}"
    name, kind = partition
    join, index = d.part_index(name, kind, parts, "t")
    col = f"t.{d.quote(name)}"
    if not join:
        # One scan: the NULL partition is one more group (a second scan of a 10M-row
        # Postgres table only for it cost 10% of the whole).
        return (
            f"SELECT CASE WHEN {col} IS NULL THEN -1 ELSE {index} END, {aggregates} "
            f"FROM {relation} t WHERE TRUE{keyed} GROUP BY 1"
        )
    return (
        f"SELECT {index}, {aggregates} FROM {relation} t{join} WHERE {col} IS NOT NULL{keyed} "
        f"GROUP BY 1 UNION ALL SELECT -1, {aggregates} FROM {relation} t WHERE {col} IS NULL"
        f"{keyed}"
    )


# -- the other statements of a diff across engines (backfill.audit.crossdiff) ---------------------
def filtered(relation: str, where: str | None) -> str:
    """``relation`` restricted by the caller's filter ``where`` (in the engine's SQL)."""
    return relation if where is None else f"(SELECT * FROM {relation} WHERE {where})"


def in_periods(
    d: Dialect, relation: str, column: str, kind: ColumnKind, periods: Sequence[Period]
) -> str:
    """``relation`` restricted to the rows whose ``column`` falls in ``periods`` (UTC instants;
    the dialect's period filter, as the engines' own reads filter)."""
    return f"(SELECT * FROM {relation} t WHERE {d.in_periods(column, periods, kind, 't')})"


def duplicate_key_scan(d: Dialect, relation: str, key: Sequence[str]) -> str:
    """One row (key values..., count) of a key held by more than one row (none when unique);
    rows with a NULL in the key are not counted (the diff counts them apart)."""
    cols = ", ".join(d.quote(k) for k in key)
    not_null = " AND ".join(f"{d.quote(k)} IS NOT NULL" for k in key)
    return (
        f"SELECT {cols}, count(*) FROM {relation} t WHERE {not_null} "
        f"GROUP BY {cols} HAVING count(*) > 1 LIMIT 1"
    )


def bounds_scan(d: Dialect, relation: str, column: str) -> str:
    """(earliest, latest) value of the date or timestamp ``column``, as stored."""
    col = d.quote(column)
    return f"SELECT min({col}), max({col}) FROM {relation} t"


def instant_bounds_scan(d: Dialect, relation: str, column: str) -> str:
    """(earliest, latest) value of the date or timestamp ``column`` as UTC instants."""
    col = d.as_instant(d.quote(column))
    return f"SELECT min({col}), max({col}) FROM {relation} t"
