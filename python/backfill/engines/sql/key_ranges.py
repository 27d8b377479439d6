"""The SQL of key-range bisection (``backfill.diff_tables``): the rows of a segment of a table (a
partition, or the whole table) cut into ranges of its key, each range's canonical fingerprint
computed in one scan per side, a sample of keys to choose the next cuts from, and the rows of
chosen ranges streamed.

A key is compared as a tuple, lexicographically: ``(k1, k2)`` lies in ``[lo, hi)`` when it is at
least ``lo`` and below ``hi`` in that order. A bound is a *prefix* of a key: ``(5,)`` is below
every key whose first column is 5 or more, so a range ``[(5,), (6,))`` holds every key whose first
column is 5, and cuts of a range whose first column holds one value (``(5, 'b')``, ``(5, 'm')``)
split it by the next column. Strings compare bytewise (PostgreSQL ``COLLATE "C"``; DuckDB's
default binary collation), which is also Python's order of ``str`` (UTF-8 preserves code point
order), so bounds chosen in Python cut both engines' rows identically. Rows with a NULL in a key
column lie in no range (they are streamed apart: the diff counts them as null keys).

Every statement here assigns a row to its range by one expression: a binary search over the
segments' partitions, then over the partition's ranges sorted by lower bound, as nested ``CASE``
expressions, so a row costs a few comparisons whatever the number of ranges, and both engines
evaluate the same expression.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

from ...errors import InvalidInputError
from ..base import Column, ColumnKind, Part
from .canonical import Encoded, row_text, streamed_value
from .dialect import Dialect

__all__ = [
    "BISECTABLE_KINDS",
    "SAMPLE_MODULUS",
    "KeyRange",
    "KeyValue",
    "key_literal",
    "range_rows_select",
    "ranges_scan",
    "sample_scan",
]

KeyValue = int | Decimal | str | dt.date | dt.datetime | bool
#: the kinds of key column whose order both engines and Python agree on
BISECTABLE_KINDS = frozenset(
    {
        ColumnKind.INTEGER,
        ColumnKind.DECIMAL,
        ColumnKind.STRING,
        ColumnKind.DATE,
        ColumnKind.TIMESTAMP,
        ColumnKind.TIMESTAMP_TZ,
        ColumnKind.BOOLEAN,
    }
)
#: a row is sampled when its key's hash modulo this is below the range's limit
SAMPLE_MODULUS = 1 << 20


@dataclasses.dataclass(frozen=True)
class KeyRange:
    """The rows of segment ``segment`` (the index of its partition in ``parts``; -1: the rows
    whose partition column is NULL; 0 without partitions) whose key lies in ``[lo, hi)``; a
    bound is a key prefix, None unbounded."""

    segment: int
    lo: tuple[KeyValue, ...] | None = None
    hi: tuple[KeyValue, ...] | None = None


def key_literal(d: Dialect, value: KeyValue, kind: ColumnKind) -> str:
    """``value`` as a SQL literal compared with a key column of ``kind`` (timestamps: UTC)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, str):
        return d.string(value)
    if isinstance(value, dt.datetime):
        utc = value.astimezone(dt.timezone.utc) if value.tzinfo else value
        text = utc.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        if kind == ColumnKind.TIMESTAMP_TZ:
            return f"CAST('{text}+00:00' AS TIMESTAMPTZ)"
        return f"CAST('{text}' AS TIMESTAMP)"
    if isinstance(value, dt.date):
        return f"CAST('{value.isoformat()}' AS DATE)"
    raise InvalidInputError(f"key value {value!r}: expected a number, string, date or timestamp")


_Bound = tuple[KeyValue, ...] | None


class _RangeIndex:
    """The expression of a row's range (its index in ``ranges``, NULL outside them): a binary
    search over the segments' partitions (on the partition column), and in the partition found
    a binary search over its ranges' lower bounds (on the key alone).

    One expression over the table's own columns, so no engine inlines a computed segment
    column into it: DuckDB's filter pushdown substituted the segment's CASE into each of the
    thousands of places a search over (segment, key) tuples read it, and planning 3,200 ranges
    took over 20 GB. A leaf checks only the bounds its ancestors' comparisons do not imply (the
    ranges cut from one range are contiguous), so most leaves are their bare index."""

    def __init__(
        self,
        d: Dialect,
        key: Sequence[Column],
        ranges: Sequence[KeyRange],
        partition: tuple[str, ColumnKind] | None,
        parts: Sequence[Part],
        alias: str,
    ) -> None:
        self.d, self.parts, self.partition, self.alias = d, parts, partition, alias
        self.columns = [d.bytewise(f"{alias}.{d.quote(c.name)}", c.kind) for c in key]
        self.kinds = [c.kind for c in key]
        self.by_segment: dict[int, list[tuple[int, KeyRange]]] = {}
        for i, r in enumerate(ranges):
            self.by_segment.setdefault(r.segment, []).append((i, r))
        for rs in self.by_segment.values():
            # Unbounded below sorts first within its segment.
            rs.sort(key=lambda ir: (ir[1].lo is not None, ir[1].lo or ()))

    def _values(self, bound: tuple[KeyValue, ...]) -> list[str]:
        return [key_literal(self.d, v, k) for v, k in zip(bound, self.kinds, strict=False)]

    def _below(self, bound: tuple[KeyValue, ...]) -> str:
        """Whether the row's key is below the prefix ``bound`` (lexicographically)."""
        v = self._values(bound)
        c = self.columns[0 : len(v)]
        text = f"{c[-1]} < {v[-1]}"
        for i in range(len(v) - 2, -1, -1):
            text = f"({c[i]} < {v[i]} OR ({c[i]} = {v[i]} AND {text}))"
        return text

    def _keys(self, rs: Sequence[tuple[int, KeyRange]], above: _Bound, below: _Bound) -> str:
        """The search over ``rs`` (sorted by lower bound) for a row whose key is known to be at
        least ``above`` and below ``below`` (None: not known)."""
        if len(rs) == 1:
            index, r = rs[0]
            terms = [f"NOT {self._below(r.lo)}"] if r.lo is not None and r.lo != above else []
            if r.hi is not None and r.hi != below:
                terms.append(self._below(r.hi))
            return f"CASE WHEN {' AND '.join(terms)} THEN {index} END" if terms else str(index)
        mid = len(rs) // 2
        lo = rs[mid][1].lo
        assert lo is not None  # only a segment's first range can be open below
        return (
            f"CASE WHEN {self._below(lo)} THEN {self._keys(rs[:mid], above, lo)} "
            f"ELSE {self._keys(rs[mid:], lo, below)} END"
        )

    def expression(self) -> str:
        if self.partition is None:
            return self._keys(self.by_segment[0], None, None)
        d, parts = self.d, self.parts
        name, kind = self.partition
        col = f"{self.alias}.{d.quote(name)}"
        chosen = sorted(i for i in self.by_segment if i >= 0)

        # The chosen partitions do not overlap: a row costs a few comparisons to find its own.
        def tree(first: int, last: int) -> str:
            if last - first == 1:
                i = chosen[first]
                _, s, e = parts[i]
                return (
                    f"CASE WHEN {col} >= {d.literal(s, kind)} AND {col} < {d.literal(e, kind)} "
                    f"THEN {self._keys(self.by_segment[i], None, None)} END"
                )
            mid = (first + last) // 2
            start = d.literal(parts[chosen[mid]][1], kind)
            return f"CASE WHEN {col} < {start} THEN {tree(first, mid)} ELSE {tree(mid, last)} END"

        index = tree(0, len(chosen)) if chosen else "NULL"
        if -1 in self.by_segment:
            index = (
                f"CASE WHEN {col} IS NULL THEN {self._keys(self.by_segment[-1], None, None)} "
                f"ELSE {index} END"
            )
        return index


def _restricted(
    d: Dialect,
    relation: str,
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    segments: Sequence[int],
    also: str | None = None,
) -> str:
    """``relation`` as a FROM item aliased ``t`` holding the rows of ``segments`` (indexes in
    ``parts``; -1 the NULL partition) and those for which ``also`` holds; the relation itself
    without ``partition``."""
    if partition is None:
        return f"{relation} t"  # one segment: every row
    name, kind = partition
    chosen = sorted(i for i in set(segments) if i >= 0)
    terms = [d.in_periods(name, [(parts[i][1], parts[i][2]) for i in chosen], kind, "t")]
    if -1 in segments:
        terms.append(f"t.{d.quote(name)} IS NULL")
    if also:
        terms.append(also)
    return f"(SELECT t.* FROM {relation} t WHERE {' OR '.join(terms)}) t"


def _key_not_null(d: Dialect, key: Sequence[Column], alias: str) -> str:
    return " AND ".join(f"{alias}.{d.quote(c.name)} IS NOT NULL" for c in key)


def ranges_scan(
    d: Dialect,
    relation: str,
    columns: Sequence[Encoded],
    key: Sequence[Column],
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    ranges: Sequence[KeyRange],
) -> str:
    """One scan of ``relation`` whose rows are (index in ``ranges``, row count, digest) for the
    ranges holding rows: the canonical fingerprint of each range (see :mod:`.canonical`), and
    one whose index is NULL (the scanned rows outside the ranges), to be skipped."""
    where = _ranges_where(d, relation, key, partition, parts, ranges)
    text = row_text(d, columns, "t")
    # The rows outside every range form the group of a NULL index, which the caller skips: a
    # filter on the index would be evaluated (and planned) once more.
    return (
        f"SELECT r.b, count(*), {d.canonical_digest('r.x')} FROM (SELECT {where[0]} AS b, "
        f"{text} AS x "
        f"FROM {where[1]} WHERE {_key_not_null(d, key, 't')}) r GROUP BY r.b"
    )


def _ranges_where(
    d: Dialect,
    relation: str,
    key: Sequence[Column],
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    ranges: Sequence[KeyRange],
    also: str | None = None,
) -> tuple[str, str]:
    """(the range index expression of a row of ``t``, the FROM item ``t``: the rows of the
    ranges' segments and those for which ``also`` holds)."""
    if not ranges:
        raise InvalidInputError("a key-range scan needs at least one range")
    segments = [r.segment for r in ranges]
    source = _restricted(d, relation, partition, parts, segments, also)
    return _RangeIndex(d, key, ranges, partition, parts, "t").expression(), source


def sample_scan(
    d: Dialect,
    relation: str,
    key: Sequence[Column],
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    ranges: Sequence[KeyRange],
    limits: Sequence[int],
) -> str:
    """The rows (index in ``ranges``, key values...) of a sample of each range's keys: a key
    whose engine hash modulo :data:`SAMPLE_MODULUS` is below the range's entry in ``limits``
    (so about ``limit / SAMPLE_MODULUS`` of its rows; the same keys every time)."""
    index, source = _ranges_where(d, relation, key, partition, parts, ranges)
    names = [c.name for c in key]
    cols = ", ".join(f"t.{d.quote(n)}" for n in names)
    values = ", ".join(f"({i}, {lim})" for i, lim in enumerate(limits))
    h = d.row_hash(key, "t")
    return (
        f"SELECT r.b, {', '.join(f'r.{d.quote(n)}' for n in names)} FROM (SELECT {index} AS b, "
        f"abs(({h}) % {SAMPLE_MODULUS}) AS m, {cols} FROM {source} WHERE "
        f"{_key_not_null(d, key, 't')}) r JOIN (VALUES {values}) AS q(b, lim) ON q.b = r.b "
        "WHERE r.m < q.lim"
    )


def range_rows_select(  # noqa: PLR0913 (one statement: every part of it is asked for)
    d: Dialect,
    relation: str,
    columns: Sequence[tuple[Column, str | None]],
    key: Sequence[Column],
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    whole: Sequence[int],
    ranges: Sequence[KeyRange],
    null_keys: bool = True,
) -> str:
    """The rows of ``relation`` to stream, in the relation's order: ``columns`` (each cast to
    ``"float"`` or ``"bigint"``, or as the dialect streams it) of the segments ``whole`` (indexes
    in ``parts``, -1 the NULL partition; ``[0]`` without partitions: every row), of the key
    ``ranges``, and, with ``null_keys``, every row with a NULL in a key column (a caller reading
    the rows in several statements asks for them in one)."""
    items = [
        f"{streamed_value(d, column, cast)} AS {d.quote(column.name)}" for column, cast in columns
    ]
    terms = [f"t.{d.quote(c.name)} IS NULL" for c in key] if null_keys else []
    if partition is None:
        if whole:
            terms = ["TRUE"]
    else:
        name, kind = partition
        periods = [(parts[i][1], parts[i][2]) for i in whole if i >= 0]
        if periods:
            terms.append(d.in_periods(name, periods, kind, "t"))
        if -1 in whole:
            terms.append(f"t.{d.quote(name)} IS NULL")
    terms = terms or ["FALSE"]
    source = f"{relation} t"
    if ranges and terms != ["TRUE"]:
        # One scan in the relation's order: the rows of the other terms, and those of the
        # ranges' segments, of which the ranges' rows are those whose range index is not NULL.
        others = " OR ".join(terms)
        index, source = _ranges_where(d, relation, key, partition, parts, ranges, others)
        terms = [f"({others})", f"({index}) IS NOT NULL"]
    return f"SELECT {', '.join(items)} FROM {source} WHERE {' OR '.join(terms)}"
