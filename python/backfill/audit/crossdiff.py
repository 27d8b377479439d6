"""Diff across engines: the same table in two warehouses, compared by fingerprints first and
row by row only where they differ.

>>> r = backfill.diff_tables("duckdb:///shop.duckdb#main.fct_daily_sales",      # doctest: +SKIP
...                          "postgresql://u@h/shop#public.fct_daily_sales",
...                          key="sales_date", partition_by="sales_date", grain="month")
>>> r.summary.changed, r.partitions.to_pandas(), r.snapshots                    # doctest: +SKIP

Each side computes, in its own engine, the canonical fingerprint of each partition of
``partition_by`` at ``grain`` in ``tz`` (:mod:`backfill.engines.sql.canonical`: the same value on
every engine for the same rows; one segment without ``partition_by``). Only the partitions whose
fingerprints differ are read, as Arrow, into the C++ diff (:func:`backfill.diff`); the partitions
whose fingerprints are equal are added to the result as matched and unchanged. The result is the
:class:`~backfill.audit.diff.DiffResult` that :func:`backfill.diff` gives for the same rows, plus
:attr:`TablesDiffResult.snapshots` (how each side's reads were kept consistent),
:attr:`TablesDiffResult.segments` (the fingerprint of every partition on each side) and
:attr:`TablesDiffResult.column_types` (columns whose types differ between the sides: compared as
what, or not compared).

Measures (default: the numeric compared columns, as :func:`backfill.diff`) are summed per
partition in the same scan that fingerprints it, in each engine, and merged with the streamed
partitions' sums from the C++ diff (:mod:`.crossdiff_sums`): the per-column and per-partition
sums, deltas and percentages are those :func:`backfill.diff` gives for the same rows, exact for
integers and decimals, for streamed and equal partitions alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._numbers import Number
from ..calendar import Grain, partition_of, partitions
from ..engines import Column, ColumnKind, Part, PartitionFingerprint, Period
from ..engines.locations import TableSource, open_table
from ..engines.sql.canonical import (
    Encoded,
    Encoding,
    Summed,
    bounds_scan,
    compare_as,
    duplicate_key_scan,
    filtered,
    in_periods,
    instant_bounds_scan,
    segments_scan,
    streamed_value,
)
from ..engines.sql.key_ranges import range_rows_select
from ..errors import InvalidInputError
from .bisection import (
    Bisection,
    BisectionOptions,
    LevelStats,
    Side,
    StreamedRange,
    bisect,
    on_both,
)
from .crossdiff_sums import MeasureSpec, measure_specs, measure_totals, merged
from .diff import DiffOptions, DiffResult, ToleranceSpec
from .diff import diff as arrow_diff
from .local_time import column_bounds, column_instant

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

__all__ = ["ColumnTypes", "DiffProgress", "TablesDiffResult", "diff_tables"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: the segment of rows whose partition column is NULL
NULL_SEGMENT = "null"
_TIME_KINDS = (ColumnKind.DATE, ColumnKind.TIMESTAMP, ColumnKind.TIMESTAMP_TZ)


@dataclasses.dataclass(frozen=True)
class ColumnTypes:
    """A column whose types differ between the sides: how it was compared (``compared_as``
    None: not compared) and why."""

    column: str
    type_a: str
    type_b: str
    compared_as: str | None
    note: str


class TablesDiffResult(DiffResult):
    """:class:`DiffResult` of :func:`diff_tables`, with what the pushdown saw: ``segments``
    (each segment's fingerprint on each side), ``levels`` (per level of the descent, level 0
    the segments: ranges checked and differing), ``streamed`` (the segments some of whose
    rows were streamed), ``streamed_ranges`` (the key ranges streamed of bisected segments),
    ``streamed_rows`` (rows read into the diff, per side), and ``timings`` (wall seconds of
    open, fingerprints, bisection, transfer and diff; ``<step> a`` and ``<step> b``: each
    side's share of a step, whose two sides run at once; then ``diff <phase>``: the diff's)."""

    snapshots: dict[str, str]
    segments: dict[str, tuple[PartitionFingerprint | None, PartitionFingerprint | None]]
    levels: list[LevelStats]
    streamed: list[str]
    streamed_ranges: list[StreamedRange]
    streamed_rows: tuple[int, int]
    column_types: list[ColumnTypes]
    #: segment -> (a's, b's) sum of each measure, as each engine computed it in its segment scan
    segment_sums: dict[str, tuple[dict[str, Number], dict[str, Number]]]
    #: measure -> (a's, b's) total at the measure's own kind and scale (``columns`` shares one
    #: type between measures: a decimal at the largest scale, or a float beside a float one)
    measure_totals: dict[str, tuple[Number, Number]]

    def __str__(self) -> str:
        lines = [super().__str__()]
        checked = ", ".join(
            f"level {lv.level}: {lv.differing:,}/{lv.checked:,} differ" for lv in self.levels
        )
        rows = sum(fp.rows for pair in self.segments.values() for fp in pair if fp)
        lines.append(
            f"  pushdown: {checked}; streamed {self.streamed_rows[0]:,} + "
            f"{self.streamed_rows[1]:,} rows of {rows:,} ({len(self.streamed)} segments, "
            f"{len(self.streamed_ranges)} key ranges)"
        )
        t = self.timings
        lines.append(
            f"  time: open {t.get('open', 0):.2f} s, fingerprints {t.get('fingerprints', 0):.2f} s"
            f" + bisection {t.get('bisection', 0):.2f} s, transfer {t.get('transfer', 0):.2f} s,"
            f" diff {t.get('diff', 0):.2f} s"
        )
        return "\n".join(lines)


@dataclasses.dataclass
class _Plan:
    key: list[str]
    compared: list[str]  # key first, then the other compared columns, in a's order
    encoded: list[Encoded]
    # column -> the type both sides stream it as ("float", "bigint"), when one is needed
    casts: dict[str, str]
    column_types: list[ColumnTypes]


def _by_name(source: TableSource, side: str) -> dict[str, Column]:
    return {c.name: c for c in source.columns}


def _plan(
    a: TableSource, b: TableSource, key: Sequence[str], columns: Sequence[str] | None
) -> _Plan:
    ca, cb = _by_name(a, "a"), _by_name(b, "b")
    for k in key:
        for side, cols, src in (("a", ca, a), ("b", cb, b)):
            if k not in cols:
                raise InvalidInputError(
                    f"key column {k!r} is not a column of {side} ({src.location}; columns: "
                    f"{', '.join(cols)})"
                )
    wanted = list(columns) if columns is not None else [c for c in ca if c in cb]
    for c in wanted:
        if c not in ca or c not in cb:
            raise InvalidInputError(
                f"column {c!r} is not a column of {'a' if c not in ca else 'b'}"
            )
    names = list(key) + [c for c in wanted if c not in key]
    plan = _Plan(list(key), [], [], {}, [])
    for name in names:
        enc, note = compare_as(ca[name], cb[name])
        # Spellings (VARCHAR vs text) are not differences; kinds (numeric vs double) are.
        if ca[name].kind != cb[name].kind or enc is None:
            plan.column_types.append(
                ColumnTypes(name, ca[name].type, cb[name].type, enc and enc.value, note)
            )
        if enc is None:
            if name in key:
                raise InvalidInputError(f"key column {name!r} cannot be compared: {note}")
            continue
        plan.compared.append(name)
        plan.encoded.append(Encoded(name, enc))
        if enc == Encoding.FLOAT:
            plan.casts[name] = "float"
        elif (
            enc == Encoding.EXACT
            and ColumnKind.INTEGER in (ca[name].kind, cb[name].kind)
            and (ca[name].kind == cb[name].kind)
        ):
            plan.casts[name] = "bigint"  # int32 against int64: one Arrow type on both sides
    return plan


def _check_unique(side: Side) -> None:
    source, key = side.source, [c.name for c in side.key]
    if source.unique(key):
        return  # a primary key or unique index says so: no scan
    rows = source.rows(duplicate_key_scan(source.dialect, side.relation, key))
    if rows:
        shown = ", ".join(f"{k}={v!r}" for k, v in zip(key, rows[0][:-1], strict=True))
        raise InvalidInputError(
            f"key ({', '.join(key)}) is not unique in {side.name} ({source.location}): "
            f"{shown} has {rows[0][-1]} rows"
        )


def _instant(value: Any, kind: ColumnKind, tz: str) -> dt.datetime:
    """The instant the diff reads a partition column's ``value`` (of ``kind``) as."""
    if not isinstance(value, dt.date):
        raise InvalidInputError(f"partition value {value!r} is not a date or timestamp")
    if kind == ColumnKind.TIMESTAMP_TZ and isinstance(value, dt.datetime) and not value.tzinfo:
        value = value.replace(tzinfo=dt.timezone.utc)  # read as a UTC instant (as_instant)
    return column_instant(value, tz)


def _parts(
    sides: Sequence[tuple[TableSource, str]], column: str, grain: Grain, tz: str
) -> list[Part]:
    """The partitions of ``column`` at ``grain`` in ``tz`` from the earliest to the latest value
    on either side (a naive timestamp read as the wall clock in ``tz``, a date as its first
    instant there, as :func:`backfill.diff` reads them)."""
    lows, highs = [], []
    for source, rel in sides:
        kind = _kind(source, column)
        scan = (
            instant_bounds_scan(source.dialect, rel, column)
            if kind == ColumnKind.TIMESTAMP_TZ
            else bounds_scan(source.dialect, rel, column)
        )
        low, high = source.rows(scan)[0]
        if low is not None:
            lows.append(_instant(low, kind, tz))
            highs.append(_instant(high, kind, tz))
    if not lows:
        return []
    first, last = partition_of(min(lows), grain, tz), partition_of(max(highs), grain, tz)
    return [(p.label, p.start, p.end) for p in partitions(grain, first.start, last.end, tz)]


def _measures(plan: _Plan, key: Sequence[str], measures: Sequence[str] | None) -> list[str]:
    """The measures to sum: ``measures``, or the numeric compared columns besides the key (as
    :func:`backfill.diff` chooses them; a column named ``rows`` would clash with the row
    counts)."""
    numeric = {e.name for e in plan.encoded if e.encoding in (Encoding.EXACT, Encoding.FLOAT)}
    if measures is None:
        return [c for c in plan.compared if c in numeric and c not in key and c != "rows"]
    for c in measures:
        if c not in numeric:
            raise InvalidInputError(
                f"measure {c!r}: expected a numeric column compared on both sides (numeric "
                f"compared columns: {', '.join(c for c in plan.compared if c in numeric)})"
            )
    return list(measures)


def _summed(source: TableSource, plan: _Plan, measures: Sequence[str]) -> list[Summed]:
    """What ``source``'s segment scan sums: each measure as it would be streamed."""
    cols = _by_name(source, "")
    exact = {e.name for e in plan.encoded if e.encoding == Encoding.EXACT}
    return [
        Summed(
            streamed_value(source.dialect, cols[m], plan.casts.get(m)),
            m in exact,
            integer=m in exact and cols[m].kind == ColumnKind.INTEGER,
        )
        for m in measures
    ]


def _fingerprints(
    side: Side, plan: _Plan, measures: Sequence[str]
) -> tuple[dict[str, PartitionFingerprint], dict[str, tuple[Any, ...]]]:
    """Per segment: the fingerprint of the rows of ``side`` whose key has no NULL (segments
    holding such rows), and the sums of ``measures`` over all its rows as the engine returned
    them (text of exact sums, floats)."""
    source = side.source
    key = [c.name for c in side.key]
    summed = _summed(source, plan, measures)
    parts = side.parts
    sql = segments_scan(
        source.dialect, side.relation, side.encoded, side.partition, parts, summed, key
    )
    labels = {i: label for i, (label, _, _) in enumerate(parts)} | {-1: NULL_SEGMENT}
    if side.partition is None:
        labels = {0: "all"}
    try:
        rows = source.rows(sql)
    except InvalidInputError as exc:
        if not measures:
            raise
        raise InvalidInputError(
            f"{exc} (summing the measures {', '.join(measures)}; one whose sum leaves 38 digits "
            "cannot be summed exactly: leave it out of measures=)"
        ) from None
    out, sums = {}, {}
    for i, n, h, *total in rows:
        label = labels[int(str(i))]
        if int(str(n)):
            out[label] = PartitionFingerprint.of(int(str(n)), int(str(h)))
        if any(v is not None for v in total):  # a segment of only NULL keys has sums too
            sums[label] = tuple(total)
    return out, sums


def _segment_index(parts: Sequence[Part], partition_by: str | None) -> dict[str, int]:
    """Segment label -> its index in the statements (see :mod:`.bisection`)."""
    if partition_by is None:
        return {"all": 0}
    return {label: i for i, (label, _, _) in enumerate(parts)} | {NULL_SEGMENT: -1}


@dataclasses.dataclass(frozen=True)
class DiffProgress:
    """Where :func:`diff_tables` is: ``stage`` (``fingerprints``, ``bisection``, ``transfer``,
    ``diff``, ``done``), segments and key ranges ``checked`` so far (fingerprinted on each
    side), how many of them ``differing``, the bisection ``level``, ``rows_streamed`` (both
    sides)."""

    stage: str
    checked: int
    differing: int
    level: int
    rows_streamed: int


@dataclasses.dataclass
class _Run:
    """The state of one :func:`diff_tables` call that its steps share."""

    plan: _Plan
    sides: tuple[Side, Side]
    parts: list[Part]
    pool: ThreadPoolExecutor
    progress: Callable[[DiffProgress], None] | None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    checked: int = 0
    differing: int = 0
    level: int = 0
    rows: int = 0

    def tell(self, stage: str) -> None:
        if self.progress is not None:
            self.progress(DiffProgress(stage, self.checked, self.differing, self.level, self.rows))

    def both(self, ask: Callable[[Side], T], step: str) -> tuple[T, T]:
        return on_both(self.pool, self.sides, ask, self.timings, step)

    def on_level(self, stats: LevelStats) -> None:
        self.checked += stats.checked
        self.differing += stats.differing
        self.level = stats.level
        self.tell("bisection")

    def stream(self, cut: Bisection) -> tuple[Any, Any]:
        plan = self.plan

        def select(side: Side, whole: Sequence[int], ranges: Any, null_keys: bool) -> str:
            cols = _by_name(side.source, "")
            return range_rows_select(
                side.source.dialect,
                side.relation,
                [(cols[n], plan.casts.get(n)) for n in plan.compared],
                side.key,
                side.partition,
                side.parts,
                whole,
                ranges,
                null_keys,
            )

        def ask(side: Side) -> Any:
            # A source whose driver holds a query's rows whole (Spark) reads the whole segments
            # ``stream_periods`` at a time; the key ranges and NULL keys with the first.
            step = side.source.stream_periods
            whole = sorted(cut.whole)  # neighbouring partitions together
            if step is None or side.partition is None or len(whole) <= step:
                return _utc_zones(side.source.arrow(select(side, whole, cut.ranges, True)))
            import pyarrow as pa  # type: ignore[import-untyped]

            chunks = [whole[i : i + step] for i in range(0, len(whole), step)]
            return pa.concat_tables(
                [
                    _utc_zones(
                        side.source.arrow(select(side, chunk, cut.ranges if i == 0 else [], i == 0))
                    )
                    for i, chunk in enumerate(chunks)
                ]
            )

        return self.both(ask, "transfer")


# backfill.diff's keyword API, for the same reason as there (see audit.diff.diff).
@contextlib.contextmanager
def _open_sides(
    a: str | TableSource, b: str | TableSource, project: Project | str | Path | None
) -> Iterator[tuple[TableSource, TableSource]]:
    """Both sides open (a location opened, a source handed in as it is), and closed when the
    block ends: a source handed in is closed also when the other side cannot be opened."""
    with contextlib.ExitStack() as stack:
        for side in (a, b):
            if isinstance(side, TableSource):
                stack.enter_context(side)
        sa = a if isinstance(a, TableSource) else stack.enter_context(open_table(a, project))
        sb = b if isinstance(b, TableSource) else stack.enter_context(open_table(b, project))
        yield sa, sb


def diff_tables(  # noqa: PLR0913
    a: str | TableSource,
    b: str | TableSource,
    key: str | Sequence[str],
    *,
    partition_by: str | None = None,
    grain: Grain = "day",
    tz: str = "UTC",
    columns: Sequence[str] | None = None,
    where: str | None = None,
    tolerance: Mapping[str, ToleranceSpec] | None = None,
    measures: Sequence[str] | None = None,
    periods: Sequence[Period] | None = None,
    sample: int = 10,
    threads: int = 0,
    project: Project | str | Path | None = None,
    bisection_threshold: int = BisectionOptions.threshold,
    bisection_factor: int = BisectionOptions.factor,
    progress: Callable[[DiffProgress], None] | None = None,
) -> TablesDiffResult:
    """Compares the table at location ``a`` (old) with the one at ``b`` (new), matched on
    ``key``: ``duckdb:///path.duckdb#schema.table``, ``postgresql://...#schema.table``,
    ``iceberg:///warehouse#schema.table``, a Parquet file or a folder of them, or a model name
    (or ``schema.table``) of ``project``'s warehouse, opened by the engine its settings name
    (:func:`backfill.engines.locations.open_table`); or a :class:`TableSource` already open
    (an engine's :meth:`~backfill.engines.Engine.area_table`), which the diff closes.

    ``partition_by`` (a date or timestamp column of both) cuts both tables into partitions of
    ``grain`` in ``tz``, fingerprinted in each engine; without it the table is one segment. As
    :func:`backfill.diff` reads them, a naive timestamp is the wall clock in ``tz`` and a date
    its day there (:mod:`.local_time`); ``periods`` filter with each engine's own period filter. A
    differing segment of more than ``bisection_threshold`` rows is cut into
    ``bisection_factor`` ranges of the key, each fingerprinted again, and so on down to ranges
    of at most ``bisection_threshold`` rows (:mod:`.bisection`): only the rows of differing
    segments and ranges are streamed.
    ``columns`` (default: the columns both have) and ``where`` (a filter in each engine's SQL,
    applied to both) choose what is compared; ``periods`` (UTC ``(start, end)`` instants, with
    ``partition_by``) keeps the rows whose ``partition_by`` falls in one of them, on both sides
    (each engine's own period filter). ``measures`` (default: the numeric compared columns
    besides the key) are summed per partition in each engine (see the module's documentation);
    ``tolerance`` and ``sample`` are :func:`backfill.diff`'s. ``progress`` is called after each
    step with a :class:`DiffProgress`. A key that is not unique on a side, a side that cannot be
    read or has no such table raise :class:`~backfill.InvalidInputError` naming it.
    """
    keys = [key] if isinstance(key, str) else list(key)
    options = DiffOptions(
        columns=None,
        partition_by=partition_by,
        grain=grain,
        tz=tz,
        tolerance=tolerance,
        measures=[],
        sample=sample,
        threads=threads,
    )
    options.core_kwargs(keys)  # checks the options before anything connects
    bisection = BisectionOptions(bisection_threshold, bisection_factor)
    bisection.check()
    t0 = time.perf_counter()
    with (
        _open_sides(a, b, project) as (sa, sb),
        ThreadPoolExecutor(2, thread_name_prefix="diff_tables") as pool,
    ):
        plan = _plan(sa, sb, keys, columns)
        names = _measures(plan, keys, measures)
        rels = (filtered(sa.relation, where), filtered(sb.relation, where))
        _check_partition(sa, sb, plan, partition_by)
        if partition_by is not None and periods is not None:
            rels = (
                in_periods(sa.dialect, rels[0], partition_by, _kind(sa, partition_by), periods),
                in_periods(sb.dialect, rels[1], partition_by, _kind(sb, partition_by), periods),
            )
        elif periods is not None:
            raise InvalidInputError("periods= filters the partition_by column: pass partition_by")
        parts = []
        if partition_by is not None:
            parts = _parts([(sa, rels[0]), (sb, rels[1])], partition_by, grain, tz)
        sides = (
            _side("a", sa, rels[0], plan, partition_by, parts, tz),
            _side("b", sb, rels[1], plan, partition_by, parts, tz),
        )
        run = _Run(plan, sides, parts, pool, progress)
        run.both(_check_unique, "unique")
        run.timings["open"] = time.perf_counter() - t0
        t = time.perf_counter()
        scans = run.both(lambda side: _fingerprints(side, plan, names), "fingerprints")
        run.timings["fingerprints"] = time.perf_counter() - t
        fps = (scans[0][0], scans[1][0])
        pushed = (scans[0][1], scans[1][1])
        labels = sorted(set(fps[0]) | set(fps[1]))
        differing = [lb for lb in labels if fps[0].get(lb) != fps[1].get(lb)]
        run.checked, run.differing = len(labels), len(differing)
        run.tell("fingerprints")
        t = time.perf_counter()
        index = _segment_index(run.parts, partition_by)
        rows = [[fp[lb].rows if lb in fp else 0 for fp in fps] for lb in differing]
        cut = bisect(
            sides,
            run.parts,
            [(index[lb], na, nb) for lb, (na, nb) in zip(differing, rows, strict=True)],
            bisection,
            pool,
            run.on_level,
            run.timings,
        )
        run.timings["bisection"] = time.perf_counter() - t
        t = time.perf_counter()
        tables = run.stream(cut)
        run.timings["transfer"] = time.perf_counter() - t
        run.rows = tables[0].num_rows + tables[1].num_rows
        run.tell("transfer")
        specs = measure_specs(names, tables[0].schema, tables[1].schema)
        snapshots = {"a": sa.snapshot, "b": sb.snapshot}
    t = time.perf_counter()
    streamed = arrow_diff(
        tables[0],
        tables[1],
        keys,
        partition_by=partition_by,
        grain=grain,
        tz=tz,
        tolerance=tolerance,
        measures=names,
        sample=sample,
        on_duplicate="error",
        threads=threads,
    )
    run.timings["diff"] = time.perf_counter() - t
    label_of = {i: lb for lb, i in index.items()}
    same = {lb: fps[0][lb].rows for lb in labels if lb not in differing}
    for i, n in cut.unchanged.items():
        same[label_of[i]] = same.get(label_of[i], 0) + n
    # Every segment's sums from its scan (a segment of only NULL keys has no fingerprint).
    summed_labels = sorted(set(labels) | set(pushed[0]) | set(pushed[1]))

    def summed(side: Mapping[str, tuple[Any, ...]], lb: str) -> dict[str, Number]:
        raws = side.get(lb, (None,) * len(specs))
        return {s.name: s.value(raw) for s, raw in zip(specs, raws, strict=True)}

    sums = {lb: (summed(pushed[0], lb), summed(pushed[1], lb)) for lb in summed_labels}
    whole = {label_of[i] for i in cut.whole}
    result = _with_unchanged(streamed, same, run.parts, partition_by, specs, sums, whole)
    result.segment_sums = {lb: (a_sums, b_sums) for lb, (a_sums, b_sums) in sums.items()}
    result.measure_totals = measure_totals(specs, list(sums.values()), result.columns)
    result.snapshots = snapshots
    result.segments = {lb: (fps[0].get(lb), fps[1].get(lb)) for lb in labels}
    result.streamed = sorted({label_of[i] for i in cut.whole} | {r.segment for r in cut.streamed})
    result.streamed_ranges = cut.streamed
    result.streamed_rows = (tables[0].num_rows, tables[1].num_rows)
    result.levels = [
        LevelStats(0, 0, len(labels), len(differing), run.timings["fingerprints"]),
        *cut.levels,
    ]
    result.column_types = plan.column_types
    result.timings = {**run.timings, **{f"diff {k}": v for k, v in streamed.timings.items()}}
    run.tell("done")
    log.debug(
        "diff_tables %s vs %s: levels %s; %d + %d rows streamed",
        sa.location,
        sb.location,
        result.levels,
        *result.streamed_rows,
    )
    return result


def _check_partition(
    sa: TableSource, sb: TableSource, plan: _Plan, partition_by: str | None
) -> None:
    """Checks that ``partition_by`` is a date or timestamp column of both sides, compared."""
    if partition_by is None:
        return
    for side, src in (("a", sa), ("b", sb)):
        col = _by_name(src, side).get(partition_by)
        if col is None or col.kind not in _TIME_KINDS:
            raise InvalidInputError(
                f"partition_by={partition_by!r}: expected a date or timestamp column "
                f"of {side} ({src.location}), got "
                f"{'no such column' if col is None else col.type}"
            )
    if partition_by not in plan.compared:
        raise InvalidInputError(f"partition_by={partition_by!r} must be compared too")


def _kind(source: TableSource, column: str) -> ColumnKind:
    return _by_name(source, "")[column].kind


def _side(
    name: str,
    source: TableSource,
    relation: str,
    plan: _Plan,
    partition_by: str | None,
    parts: Sequence[Part],
    tz: str,
) -> Side:
    cols = _by_name(source, "")
    partition = None if partition_by is None else (partition_by, cols[partition_by].kind)
    bounds = [] if partition is None else column_bounds(parts, partition[1], tz)
    # A column cast to float for the comparison is hashed as the float, whatever its kind.
    encoded = [
        Encoded(
            e.name, e.encoding, None if plan.casts.get(e.name) == "float" else cols[e.name].kind
        )
        for e in plan.encoded
    ]
    return Side(name, source, relation, [cols[k] for k in plan.key], partition, encoded, bounds)


def _utc_zones(table: Any) -> Any:
    """``table`` with its zoned timestamps labelled ``UTC``: the same instants that DuckDB
    labels ``Etc/UTC`` and Postgres ``UTC``, which the diff would report as a retyped column."""
    import pyarrow as pa

    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit, "UTC"), f.nullable)
        if pa.types.is_timestamp(f.type) and f.type.tz is not None
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def _with_unchanged(
    streamed: DiffResult,
    same: Mapping[str, int],
    parts: Sequence[Part],
    partition_by: str | None,
    specs: Sequence[MeasureSpec],
    sums: Mapping[str, tuple[dict[str, Number], dict[str, Number]]],
    whole: set[str],
) -> TablesDiffResult:
    """``streamed`` (the diff of the streamed rows) with the rows that were not streamed
    (``same``: per segment label, the rows of its equal fingerprints: a whole segment, or key
    ranges of a bisected one) added as matched and unchanged, to the segment's row of the
    per-partition table when some of its rows were streamed, as a row of its own otherwise.
    The measures of a segment streamed whole (``whole``) are the C++ diff's; those of every
    other segment are ``sums`` (a's, b's: the engines' sums of all its rows), since only some
    of its rows, or none, were streamed."""
    import pyarrow as pa

    from .._arrow import ArrowTable

    result = TablesDiffResult.__new__(TablesDiffResult)
    result.__dict__.update(streamed.__dict__)  # DiffResult's attributes, then patched
    n = sum(same.values())
    s = streamed.summary
    result.summary = dataclasses.replace(
        s,
        rows_old=s.rows_old + n,
        rows_new=s.rows_new + n,
        matched=s.matched + n,
        unchanged=s.unchanged + n,
    )
    columns_in = pa.RecordBatchReader.from_stream(streamed.columns).read_all()
    zero = {spec.name: spec.zero() for spec in specs}
    if partition_by is None:
        if not same and "all" in whole:
            return result  # everything streamed: the C++ diff's result as it is
        totals = sums.get("all", (zero, zero))
        columns, _ = merged(columns_in, None, [], [], specs, False, totals)
        result.columns = ArrowTable.from_arrow(columns)
        return result
    table = pa.RecordBatchReader.from_stream(streamed.partitions).read_all()
    rows = table.to_pylist()

    def label_of(row: Mapping[str, Any]) -> str:
        return row["partition"] if row["partition"] is not None else NULL_SEGMENT

    if not same and all(label_of(r) in whole for r in rows):
        return result  # every streamed partition whole, none added: the C++ diff's result
    bounds = {label: (s0, e0) for label, s0, e0 in parts}
    seen = {label_of(r): r for r in rows}
    for label, count in same.items():
        row = seen.get(label)
        if row is None:
            start, end = bounds.get(label, (None, None))
            row = {
                "partition": None if label == NULL_SEGMENT else label,
                "start": start,
                "end": end,
                "rows_old": 0,
                "rows_new": 0,
                "added": 0,
                "removed": 0,
                "changed": 0,
            }
            rows.append(row)
        row["rows_old"] += count
        row["rows_new"] += count
    engine = [None if label_of(r) in whole else sums.get(label_of(r), (zero, zero)) for r in rows]
    columns, partitions = merged(columns_in, table, rows, engine, specs, True, None)
    result.columns = ArrowTable.from_arrow(columns)
    result.partitions = ArrowTable.from_arrow(partitions)
    return result
