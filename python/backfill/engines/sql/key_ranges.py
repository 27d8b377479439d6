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
ranges sorted by (segment, lower bound), as nested ``CASE`` expressions, so a row costs a few
comparisons whatever the number of ranges, and both engines evaluate the same expression.
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
#: the column of a segment's index in the statements' inner relation
_SEGMENT = "_bf_segment"


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


class _Ranges:
    """The expression of a row's range (its index in ``ranges``, NULL outside them) over a
    relation whose rows carry their segment index in ``_SEGMENT`` (with ``segmented``)."""

    def __init__(
        self,
        d: Dialect,
        key: Sequence[Column],
        ranges: Sequence[KeyRange],
        segmented: bool,
        alias: str,
    ) -> None:
        self.d, self.key, self.segmented = d, list(key), segmented
        cols = [d.bytewise(f"{alias}.{d.quote(c.name)}", c.kind) for c in key]
        self.columns = ([f"{alias}.{_SEGMENT}"] if segmented else []) + cols
        self.kinds = ([ColumnKind.INTEGER] if segmented else []) + [c.kind for c in key]
        order = sorted(range(len(ranges)), key=lambda i: self._sort_key(ranges[i]))
        self.ranges = [(i, ranges[i]) for i in order]

    def _sort_key(self, r: KeyRange) -> tuple[object, ...]:
        # Unbounded below sorts first within its segment.
        return (r.segment, r.lo is not None, r.lo or ())

    def _bound(self, r: KeyRange, upper: bool) -> list[str] | None:
        """The literals of a range's bound as a prefix of the row tuple (segment first)."""
        seg = [str(r.segment)] if self.segmented else []
        bound = r.hi if upper else r.lo
        if bound is None:
            if not self.segmented:
                return None
            return [str(r.segment + 1)] if upper else seg
        kinds = self.kinds[len(seg) :]
        return seg + [key_literal(self.d, v, k) for v, k in zip(bound, kinds, strict=False)]

    def _below(self, values: list[str]) -> str:
        """Whether the row's tuple is below the prefix ``values`` (lexicographically)."""
        c, v = self.columns[0 : len(values)], values
        text = f"{c[-1]} < {v[-1]}"
        for i in range(len(v) - 2, -1, -1):
            text = f"({c[i]} < {v[i]} OR ({c[i]} = {v[i]} AND {text}))"
        return text

    def expression(self) -> str:
        return self._tree(0, len(self.ranges))

    def _tree(self, first: int, last: int) -> str:
        if last - first == 1:
            index, r = self.ranges[first]
            lo, hi = self._bound(r, False), self._bound(r, True)
            terms = ([f"NOT {self._below(lo)}"] if lo else []) + ([self._below(hi)] if hi else [])
            return f"CASE WHEN {' AND '.join(terms)} THEN {index} END" if terms else str(index)
        mid = (first + last) // 2
        lo = self._bound(self.ranges[mid][1], False)
        assert lo is not None  # only the first range of an unsegmented table is open below
        return (
            f"CASE WHEN {self._below(lo)} THEN {self._tree(first, mid)} "
            f"ELSE {self._tree(mid, last)} END"
        )


def _segmented(
    d: Dialect,
    relation: str,
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    segments: Sequence[int],
    restrict: bool = True,
    also: str | None = None,
) -> str:
    """``relation`` as a FROM item aliased ``t`` whose rows carry their segment's index in
    ``_SEGMENT`` when it is one of ``segments`` (indexes in ``parts``; -1 the NULL partition),
    else NULL; with ``restrict`` only the rows of ``segments`` and those for which ``also``
    holds. The relation itself without ``partition``.

    The index is computed once per row behind the dialect's :attr:`~.Dialect.fence`: an
    engine that inlined it (Postgres pulls a subquery up) would evaluate it again at each of
    the dozens of places the range search reads it."""
    if partition is None:
        return f"{relation} t"  # one segment: every row
    name, kind = partition
    col = f"t.{d.quote(name)}"
    chosen = sorted(i for i in set(segments) if i >= 0)

    # A binary search over the chosen partitions' starts (they do not overlap), not a CASE
    # per partition: a row costs a few comparisons however many partitions are bisected.
    def tree(first: int, last: int) -> str:
        if last - first == 1:
            i = chosen[first]
            _, s, e = parts[i]
            return (
                f"CASE WHEN {col} >= {d.literal(s, kind)} AND {col} < {d.literal(e, kind)} "
                f"THEN {i} END"
            )
        mid = (first + last) // 2
        start = d.literal(parts[chosen[mid]][1], kind)
        return f"CASE WHEN {col} < {start} THEN {tree(first, mid)} ELSE {tree(mid, last)} END"

    index = tree(0, len(chosen)) if chosen else "NULL"
    if -1 in segments:
        index = f"CASE WHEN {col} IS NULL THEN -1 ELSE {index} END"
    where = ""
    if restrict:
        terms = [d.in_periods(name, [(parts[i][1], parts[i][2]) for i in chosen], kind, "t")]
        if -1 in segments:
            terms.append(f"{col} IS NULL")
        if also:
            terms.append(also)
        where = " WHERE " + " OR ".join(terms)
    return f"(SELECT {index} AS {_SEGMENT}, t.* FROM {relation} t{where}{d.fence}) t"


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
    ranges holding rows: the canonical fingerprint of each range (see :mod:`.canonical`)."""
    where = _ranges_where(d, relation, key, partition, parts, ranges)
    text = row_text(d, columns, "t")
    return (
        f"SELECT r.b, count(*), {d.canonical_digest('r.x')} FROM (SELECT {where[0]} AS b, "
        f"{text} AS x "
        f"FROM {where[1]} WHERE {_key_not_null(d, key, 't')}) r WHERE r.b IS NOT NULL GROUP BY r.b"
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
    source = _segmented(d, relation, partition, parts, segments, True, also)
    return _Ranges(d, key, ranges, partition is not None, "t").expression(), source


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
