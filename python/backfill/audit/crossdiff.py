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

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._numbers import Number
from ..calendar import Grain, partition_of, partitions
from ..engines import Column, ColumnKind, Part, PartitionFingerprint, Period
from ..engines.locations import TableSource, open_table
from ..engines.sql.canonical import (
    Encoded,
    Encoding,
    Summed,
    compare_as,
    duplicate_key_scan,
    filtered,
    in_periods,
    instant_bounds_scan,
    rows_select,
    segments_scan,
    streamed_value,
)
from ..errors import InvalidInputError
from .crossdiff_sums import MeasureSpec, measure_specs, measure_totals, merged
from .diff import DiffOptions, DiffResult, ToleranceSpec
from .diff import diff as arrow_diff

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

__all__ = ["ColumnTypes", "TablesDiffResult", "diff_tables"]

log = logging.getLogger(__name__)

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
    """:class:`DiffResult` of :func:`diff_tables`, with what the pushdown saw."""

    snapshots: dict[str, str]
    segments: dict[str, tuple[PartitionFingerprint | None, PartitionFingerprint | None]]
    streamed: list[str]
    column_types: list[ColumnTypes]
    #: segment -> (a's, b's) sum of each measure, as each engine computed it in its segment scan
    segment_sums: dict[str, tuple[dict[str, Number], dict[str, Number]]]
    #: measure -> (a's, b's) total at the measure's own kind and scale (``columns`` shares one
    #: type between measures: a decimal at the largest scale, or a float beside a float one)
    measure_totals: dict[str, tuple[Number, Number]]


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


def _check_unique(source: TableSource, side: str, key: Sequence[str], rel: str) -> None:
    rows = source.rows(duplicate_key_scan(source.dialect, rel, key))
    if rows:
        shown = ", ".join(f"{k}={v!r}" for k, v in zip(key, rows[0][:-1], strict=True))
        raise InvalidInputError(
            f"key ({', '.join(key)}) is not unique in {side} ({source.location}): "
            f"{shown} has {rows[0][-1]} rows"
        )


def _utc(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    raise InvalidInputError(f"partition value {value!r} is not a date or timestamp")


def _parts(
    sides: Sequence[tuple[TableSource, str]], column: str, grain: Grain, tz: str
) -> list[Part]:
    """The partitions of ``column`` at ``grain`` in ``tz`` from the earliest to the latest value
    on either side."""
    lows, highs = [], []
    for source, rel in sides:
        low, high = source.rows(instant_bounds_scan(source.dialect, rel, column))[0]
        if low is not None:
            lows.append(_utc(low))
            highs.append(_utc(high))
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
    source: TableSource,
    rel: str,
    plan: _Plan,
    partition: tuple[str, ColumnKind] | None,
    parts: Sequence[Part],
    measures: Sequence[str],
) -> tuple[dict[str, PartitionFingerprint], dict[str, tuple[Any, ...]]]:
    """Per segment holding rows: its fingerprint, and its sums of ``measures`` as the engine
    returned them (text of exact sums, floats)."""
    summed = _summed(source, plan, measures)
    sql = segments_scan(source.dialect, rel, plan.encoded, partition, parts, summed)
    labels = {i: label for i, (label, _, _) in enumerate(parts)} | {-1: NULL_SEGMENT}
    if partition is None:
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
        if int(str(n)):
            label = labels[int(str(i))]
            out[label] = PartitionFingerprint.of(int(str(n)), int(str(h)))
            sums[label] = tuple(total)
    return out, sums


def _select(
    source: TableSource,
    plan: _Plan,
    rel: str,
    column: str | None,
    parts: Sequence[Part],
    differing: set[str],
) -> str:
    """The SELECT streaming the compared columns of the ``differing`` segments."""
    cols = _by_name(source, "")
    partition = None if column is None else (column, cols[column].kind)
    periods = [(s0, e0) for label, s0, e0 in parts if label in differing]
    return rows_select(
        source.dialect,
        rel,
        [(cols[n], plan.casts.get(n)) for n in plan.compared],
        partition,
        periods,
        NULL_SEGMENT in differing,
        every_row=column is None and bool(differing),
    )


def _read(
    source: TableSource,
    plan: _Plan,
    rel: str,
    column: str | None,
    parts: Sequence[Part],
    differing: set[str],
) -> Any:
    """The rows of the ``differing`` segments as one Arrow table: one query, or one per
    ``source.stream_periods`` partitions (Spark's driver holds a query's rows whole)."""
    step = source.stream_periods
    if step is None or column is None or len(differing) <= step:
        return source.arrow(_select(source, plan, rel, column, parts, differing))
    import pyarrow as pa  # type: ignore[import-untyped]

    labels = sorted(differing)  # neighbouring partitions together
    chunks = [set(labels[i : i + step]) for i in range(0, len(labels), step)]
    return pa.concat_tables(
        [source.arrow(_select(source, plan, rel, column, parts, chunk)) for chunk in chunks]
    )


# backfill.diff's keyword API, for the same reason as there (see audit.diff.diff).
def diff_tables(  # noqa: PLR0913
    a: str,
    b: str,
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
) -> TablesDiffResult:
    """Compares the table at location ``a`` (old) with the one at ``b`` (new), matched on
    ``key``: ``duckdb:///path.duckdb#schema.table``, ``postgresql://...#schema.table``,
    ``iceberg:///warehouse#schema.table``, a Parquet file or a folder of them, or a model name
    (or ``schema.table``) of ``project``'s warehouse, opened by the engine its settings name
    (:func:`backfill.engines.locations.open_table`).

    ``partition_by`` (a date or timestamp column of both) cuts both tables into partitions of
    ``grain`` in ``tz``, fingerprinted in each engine; only differing ones are streamed.
    ``columns`` (default: the columns both have) and ``where`` (a filter in each engine's SQL,
    applied to both) choose what is compared; ``periods`` (UTC ``(start, end)`` instants, with
    ``partition_by``) keeps the rows whose ``partition_by`` falls in one of them, on both sides
    (each engine's own period filter). ``measures`` (default: the numeric compared columns
    besides the key) are summed per partition in each engine (see the module's documentation);
    ``tolerance`` and ``sample`` are :func:`backfill.diff`'s. A key that is not unique on a
    side, a side that cannot be read or has no such table raise
    :class:`~backfill.InvalidInputError` naming it.
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
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with open_table(a, project) as sa, open_table(b, project) as sb:
        plan = _plan(sa, sb, keys, columns)
        names = _measures(plan, keys, measures)
        rels = (filtered(sa.relation, where), filtered(sb.relation, where))
        partition: tuple[str, ColumnKind] | None = None
        parts: list[Part] = []
        if partition_by is not None:
            kinds = []
            for side, src in (("a", sa), ("b", sb)):
                col = _by_name(src, side).get(partition_by)
                if col is None or col.kind not in _TIME_KINDS:
                    raise InvalidInputError(
                        f"partition_by={partition_by!r}: expected a date or timestamp column "
                        f"of {side} ({src.location}), got "
                        f"{'no such column' if col is None else col.type}"
                    )
                kinds.append(col.kind)
            if partition_by not in plan.compared:
                raise InvalidInputError(f"partition_by={partition_by!r} must be compared too")
            partition = (partition_by, kinds[0])
            if periods is not None:
                rels = (
                    in_periods(sa.dialect, rels[0], partition_by, kinds[0], periods),
                    in_periods(sb.dialect, rels[1], partition_by, kinds[1], periods),
                )
            parts = _parts([(sa, rels[0]), (sb, rels[1])], partition_by, grain, tz)
        elif periods is not None:
            raise InvalidInputError("periods= filters the partition_by column: pass partition_by")
        for side, src, rel in (("a", sa, rels[0]), ("b", sb, rels[1])):
            _check_unique(src, side, keys, rel)
        timings["open"] = time.perf_counter() - t0
        fps, pushed = [], []
        for name, src, rel in (("a", sa, rels[0]), ("b", sb, rels[1])):
            t = time.perf_counter()
            side_parts = parts
            part_of_side = (
                None if partition is None else (partition[0], _by_name(src, "")[partition[0]].kind)
            )
            fp, sums = _fingerprints(src, rel, plan, part_of_side, side_parts, names)
            fps.append(fp)
            pushed.append(sums)
            timings[f"fingerprints {name}"] = time.perf_counter() - t
        labels = sorted(set(fps[0]) | set(fps[1]))
        differing = {lb for lb in labels if fps[0].get(lb) != fps[1].get(lb)}
        t = time.perf_counter()
        tables = [
            _read(src, plan, rel, partition_by, parts, differing)
            for src, rel in ((sa, rels[0]), (sb, rels[1]))
        ]
        tables = [_utc_zones(table) for table in tables]
        timings["stream"] = time.perf_counter() - t
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
    timings["diff"] = time.perf_counter() - t
    same = {lb: fps[0][lb] for lb in labels if lb not in differing}
    sums = {
        lb: tuple(
            {
                s.name: s.value(raw)
                for s, raw in zip(specs, side.get(lb, (None,) * len(specs)), strict=True)
            }
            for side in pushed
        )
        for lb in labels
    }
    result = _with_unchanged(
        streamed, same, parts, partition_by, specs, {lb: sums[lb][0] for lb in same}
    )
    result.segment_sums = {lb: (a_sums, b_sums) for lb, (a_sums, b_sums) in sums.items()}
    result.measure_totals = measure_totals(specs, list(sums.values()), result.columns)
    result.snapshots = snapshots
    result.segments = {lb: (fps[0].get(lb), fps[1].get(lb)) for lb in labels}
    result.streamed = sorted(differing)
    result.column_types = plan.column_types
    result.timings = {**timings, **{f"diff {k}": v for k, v in streamed.timings.items()}}
    log.debug(
        "diff_tables %s vs %s: %d segments, %d streamed (%d + %d rows)",
        sa.location,
        sb.location,
        len(labels),
        len(differing),
        tables[0].num_rows,
        tables[1].num_rows,
    )
    return result


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
    same: Mapping[str, PartitionFingerprint],
    parts: Sequence[Part],
    partition_by: str | None,
    specs: Sequence[MeasureSpec],
    same_sums: Mapping[str, Mapping[str, Number]],
) -> TablesDiffResult:
    """``streamed`` (the diff of the differing segments) with the equal segments' rows added as
    matched and unchanged, and their sums of the measures ``specs`` (``same_sums``: a's)."""
    import pyarrow as pa

    from .._arrow import ArrowTable

    result = TablesDiffResult.__new__(TablesDiffResult)
    result.__dict__.update(streamed.__dict__)  # DiffResult's attributes, then patched
    if not same:
        return result  # everything streamed: the C++ diff's result as it is
    n = sum(fp.rows for fp in same.values())
    s = streamed.summary
    result.summary = dataclasses.replace(
        s,
        rows_old=s.rows_old + n,
        rows_new=s.rows_new + n,
        matched=s.matched + n,
        unchanged=s.unchanged + n,
    )
    columns_in, partitions_in = (
        pa.RecordBatchReader.from_stream(t).read_all()
        for t in (streamed.columns, streamed.partitions)
    )
    bounds = {label: (s0, e0) for label, s0, e0 in parts}
    equal = [
        {
            "partition": None if lb == NULL_SEGMENT else lb,
            "start": bounds[lb][0] if lb in bounds else None,
            "end": bounds[lb][1] if lb in bounds else None,
            "rows_old": fp.rows,
            "rows_new": fp.rows,
            "added": 0,
            "removed": 0,
            "changed": 0,
        }
        for lb, fp in same.items()
    ]
    columns, partitions = merged(
        columns_in,
        partitions_in,
        equal,
        [same_sums[lb] for lb in same],
        specs,
        partition_by is not None,
    )
    result.columns = ArrowTable.from_arrow(columns)
    if partition_by is not None:
        result.partitions = ArrowTable.from_arrow(partitions)
    return result
