"""Key-range bisection of the segments whose fingerprints differ (``backfill.diff_tables``), as
data-diff and reladiff do it: a differing segment (a partition, or the whole table) larger than
``threshold`` rows is cut into about ``factor`` ranges of its key, each range is fingerprinted
on both sides, and the ranges that differ are cut again until they hold at most ``threshold``
rows; then only those ranges' rows are streamed into the diff.

One level costs one scan per side for all the ranges of that level (every range's fingerprint
in one ``GROUP BY`` of a range index, :func:`~backfill.engines.sql.key_ranges.ranges_scan`), and
before it one sampling scan per side (keys only, no hashing) that chooses the cuts: quantiles of
the union of both sides' samples, so one side's missing keys still get cut, and both engines are
asked about the same literal bounds. The two sides run at the same time (different servers, or
DuckDB, which leaves the interpreter while it works).

Keys compare as tuples (a composite key cuts by its first column, and by the next where a range
holds a single value of the first); strings bytewise on both engines. A key with a column whose
order the engines do not share (floats: NaN) is not bisected: its differing segments are
streamed whole. Rows with a NULL in a key column are never fingerprinted by range and are always
streamed (the diff counts them as null keys).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any, TypeVar

from ..engines import Column, ColumnKind, Part, PartitionFingerprint
from ..engines.locations import TableSource
from ..engines.sql.canonical import Encoded
from ..engines.sql.key_ranges import (
    BISECTABLE_KINDS,
    SAMPLE_MODULUS,
    KeyRange,
    KeyValue,
    ranges_scan,
    sample_scan,
)
from ..errors import InvalidInputError

__all__ = [
    "Bisection",
    "BisectionOptions",
    "LevelStats",
    "Side",
    "StreamedRange",
    "bisect",
    "on_both",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: samples asked per range, per cut: enough that the quantiles cut ranges of similar sizes
_SAMPLES_PER_CUT = 8
#: a guard: keys are unique, so each level shrinks the ranges about factor-fold
_MAX_LEVELS = 64


@dataclasses.dataclass(frozen=True)
class BisectionOptions:
    """``threshold``: a differing range of at most this many rows (on either side) is streamed,
    a larger one is cut into ``factor`` ranges (reladiff's defaults: 16,384 and 32)."""

    threshold: int = 16_384
    factor: int = 32

    def check(self) -> None:
        for name, value, least in (("threshold", self.threshold, 1), ("factor", self.factor, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidInputError(
                    f"bisection_{name}={value!r}: expected a whole number >= {least}"
                )


@dataclasses.dataclass(frozen=True)
class LevelStats:
    """One level of bisection: ``checked`` ranges fingerprinted on each side (of ``bisected``
    differing larger ranges of the level before), ``differing`` of them, in ``seconds`` (its
    sampling and fingerprint scans, both sides at once)."""

    level: int
    bisected: int
    checked: int
    differing: int
    seconds: float


@dataclasses.dataclass(frozen=True)
class StreamedRange:
    """A range of a segment whose rows were streamed (``lo``/``hi``: key prefixes, None
    unbounded) and its rows on each side."""

    segment: str
    lo: tuple[KeyValue, ...] | None
    hi: tuple[KeyValue, ...] | None
    rows_a: int
    rows_b: int


@dataclasses.dataclass
class Bisection:
    """What to stream: the segments ``whole`` (indexes) and key ``ranges``; ``unchanged``:
    per segment index, the rows of its ranges whose fingerprints were equal (not streamed)."""

    whole: list[int] = dataclasses.field(default_factory=list)
    ranges: list[KeyRange] = dataclasses.field(default_factory=list)
    streamed: list[StreamedRange] = dataclasses.field(default_factory=list)
    unchanged: dict[int, int] = dataclasses.field(default_factory=dict)
    levels: list[LevelStats] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Side:
    """One table as bisection asks it: its name (``a``, ``b``), its source, the relation (with
    the caller's filter), its key columns, its partition column (None: one segment), its
    compared columns as its row hash encodes them, and the partitions with the bounds its
    partition column is compared with in its SQL (:func:`.local_time.column_bounds`: a naive
    column's are wall times)."""

    name: str
    source: TableSource
    relation: str
    key: list[Column]
    partition: tuple[str, ColumnKind] | None
    encoded: list[Encoded]
    parts: list[Part] = dataclasses.field(default_factory=list)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self.source.rows(sql)


def on_both(
    pool: ThreadPoolExecutor,
    sides: tuple[Side, Side],
    ask: Callable[[Side], T],
    seconds: dict[str, float],
    step: str,
) -> tuple[T, T]:
    """``ask`` of both sides at once: two servers (or DuckDB, which releases the interpreter
    while it works) answer at the same time; each side's seconds are added to
    ``seconds["<step> <side>"]`` (each side's source is used by one thread at a time)."""

    def timed(side: Side) -> T:
        began = time.perf_counter()
        try:
            return ask(side)
        finally:
            name = f"{step} {side.name}"
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - began

    fa = pool.submit(timed, sides[0])
    fb = pool.submit(timed, sides[1])
    return fa.result(), fb.result()


def bisectable(a: Side, b: Side) -> str | None:
    """None when the key can be cut into ranges on both sides; else why not."""
    for side in (a, b):
        for c in side.key:
            if c.kind not in BISECTABLE_KINDS:
                return f"key column {c.name} is {c.type} (no order shared by the engines)"
    return None


def _normal(value: Any, kind: ColumnKind) -> KeyValue:
    """A key value as the engines return it, in the one Python form both sides' values of a
    kind compare in (timestamps as UTC instants; Postgres numerics arrive as text)."""
    if kind == ColumnKind.DECIMAL:
        return value if isinstance(value, Decimal | int) else Decimal(str(value))
    if kind == ColumnKind.INTEGER:
        return int(value)
    if kind in (ColumnKind.TIMESTAMP, ColumnKind.TIMESTAMP_TZ):
        if not isinstance(value, dt.datetime):
            raise InvalidInputError(f"key value {value!r}: expected a timestamp")
        return (
            value.astimezone(dt.timezone.utc)
            if value.tzinfo
            else value.replace(tzinfo=dt.timezone.utc)
        )
    return value  # type: ignore[no-any-return]


class _Bisector:
    """The bisection of one diff: both sides, the compared columns, the partitions."""

    def __init__(
        self,
        sides: tuple[Side, Side],
        parts: Sequence[Part],
        options: BisectionOptions,
        pool: ThreadPoolExecutor,
        on_level: Callable[[LevelStats], None] | None,
        seconds: dict[str, float],
    ) -> None:
        self.sides, self.parts = sides, list(parts)
        self.options, self.pool, self.on_level = options, pool, on_level
        self.seconds = seconds

    def both(self, ask: Callable[[Side], T]) -> tuple[T, T]:
        return on_both(self.pool, self.sides, ask, self.seconds, "bisection")

    def label(self, segment: int) -> str:
        if self.sides[0].partition is None:
            return "all"
        return "null" if segment < 0 else self.parts[segment][0]

    # -- one level --------------------------------------------------------------------------
    def samples(
        self, pending: Sequence[tuple[KeyRange, int, int]]
    ) -> list[list[tuple[KeyValue, ...]]]:
        """Per pending range, the union of both sides' sampled keys, sorted."""
        want = self.options.factor * _SAMPLES_PER_CUT
        ranges = [r for r, _, _ in pending]

        def ask(side: Side) -> list[tuple[Any, ...]]:
            counts = [na if side is self.sides[0] else nb for _, na, nb in pending]
            limits = [
                min(SAMPLE_MODULUS + 1, math.ceil(want * SAMPLE_MODULUS / n)) if n else 0
                for n in counts
            ]
            d = side.source.dialect
            sql = sample_scan(
                d, side.relation, side.key, side.partition, side.parts, ranges, limits
            )
            kinds = [c.kind for c in side.key]
            return [
                (int(row[0]), *(_normal(v, k) for v, k in zip(row[1:], kinds, strict=True)))
                for row in side.rows(sql)
            ]

        keys: list[set[tuple[KeyValue, ...]]] = [set() for _ in pending]
        for rows in self.both(ask):
            for row in rows:
                keys[row[0]].add(tuple(row[1:]))
        return [sorted(k) for k in keys]

    def cuts(self, r: KeyRange, sample: Sequence[tuple[KeyValue, ...]]) -> list[KeyRange]:
        """``r`` cut at the quantiles of its sample; ``[r]`` when the sample cannot cut it."""
        f = self.options.factor
        n = len(sample)
        points = sorted({sample[(i * n) // f] for i in range(1, f)} - {sample[0]}) if n else []
        if not points:
            return [r]
        bounds = [r.lo, *points, r.hi]
        return [KeyRange(r.segment, lo, hi) for lo, hi in itertools.pairwise(bounds)]

    def fingerprints(
        self, ranges: Sequence[KeyRange]
    ) -> tuple[dict[int, PartitionFingerprint], dict[int, PartitionFingerprint]]:
        def ask(side: Side) -> dict[int, PartitionFingerprint]:
            sql = ranges_scan(
                side.source.dialect,
                side.relation,
                side.encoded,
                side.key,
                side.partition,
                side.parts,
                ranges,
            )
            return {
                int(str(i)): PartitionFingerprint.of(int(str(n)), int(str(h)))
                for i, n, h in side.rows(sql)
                if i is not None
            }

        return self.both(ask)

    # -- the whole descent ------------------------------------------------------------------
    def run(self, segments: Sequence[tuple[int, int, int]]) -> Bisection:
        """Bisects the differing ``segments`` (index, rows a, rows b)."""
        out = Bisection()
        limit = self.options.threshold
        pending = []
        for segment, na, nb in segments:
            if max(na, nb) <= limit:
                out.whole.append(segment)
            else:
                pending.append((KeyRange(segment), na, nb))
        level = 0
        while pending:
            level += 1
            began = time.perf_counter()
            if level > _MAX_LEVELS:  # cannot happen with unique keys; streamed, not lost
                self.stream(out, pending)
                break
            children: list[KeyRange] = []
            for (r, na, nb), sample in zip(pending, self.samples(pending), strict=True):
                cut = self.cuts(r, sample)
                if len(cut) == 1:
                    self.stream(out, [(r, na, nb)])  # one key: nothing left to cut
                else:
                    children += cut
            fa, fb = self.fingerprints(children) if children else ({}, {})
            differing = 0
            bisected = len(pending)
            pending = []
            for i, r in enumerate(children):
                a, b = fa.get(i), fb.get(i)
                if a == b:
                    if a is not None:
                        out.unchanged[r.segment] = out.unchanged.get(r.segment, 0) + a.rows
                    continue
                differing += 1
                na, nb = a.rows if a else 0, b.rows if b else 0
                if max(na, nb) <= limit:
                    self.stream(out, [(r, na, nb)])
                else:
                    pending.append((r, na, nb))
            stats = LevelStats(
                level, bisected, len(children), differing, time.perf_counter() - began
            )
            out.levels.append(stats)
            log.debug("bisection level %s", stats)
            if self.on_level is not None:
                self.on_level(stats)
        return out

    def stream(self, out: Bisection, ranges: Sequence[tuple[KeyRange, int, int]]) -> None:
        for r, na, nb in ranges:
            out.ranges.append(r)
            out.streamed.append(StreamedRange(self.label(r.segment), r.lo, r.hi, na, nb))


def bisect(
    sides: tuple[Side, Side],
    parts: Sequence[Part],
    segments: Sequence[tuple[int, int, int]],
    options: BisectionOptions,
    pool: ThreadPoolExecutor,
    on_level: Callable[[LevelStats], None] | None = None,
    seconds: dict[str, float] | None = None,
) -> Bisection:
    """What to stream of the differing ``segments`` (index in ``parts``, -1 the NULL partition,
    0 without partitions; rows on each side): the small ones whole, the others' differing key
    ranges (see the module's documentation). ``on_level`` is told each level's figures;
    ``seconds["bisection a"]`` and ``["bisection b"]`` add up each side's queries."""
    why = bisectable(*sides)
    if why is not None:
        log.info("differing segments streamed whole: %s", why)
        return Bisection(whole=[s for s, _, _ in segments])
    spent = {} if seconds is None else seconds
    return _Bisector(sides, parts, options, pool, on_level, spent).run(segments)
