"""An audit's questions about one model answered in one query (the core's ``audit_scope`` for an
engine that sets ``SqlEngine.audit_in_one_query``).

An audit asks, for the published version and the audit area of a model: per-partition
fingerprints, measure totals over the backfilled periods, and whether a candidate key is unique
there. Asked one by one these are ~10 queries a model; on an engine whose every query has a high
fixed cost (Spark: planning, scheduling and a table load that dwarf the scan on partition-sized
data) that cost is the audit's time. Here both versions are scanned in one query (``UNION ALL``
of the two relations, each row tagged with its side and partition) and aggregated with
``GROUPING SETS ((side, partition), (side))``: the first set gives the fingerprints, the second
the totals and distinct counts. The expressions are the dialect's, the ones the single questions
use (the same row hash over each side's own columns, the same sums of the same column types), so
the answers are equal to theirs and the core serves them from the scope.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..._numbers import Number
from ...fingerprints import PartitionFingerprint
from ..base import WHOLE, Column, ColumnKind, Part
from .dialect import Dialect

if TYPE_CHECKING:  # pragma: no cover
    from .core import AuditScope

__all__ = ["HeldRows", "SideFacts", "answer_up_front", "audit_facts", "hold_rows"]

#: runs a query and returns its rows
Run = Callable[[str], list[tuple[Any, ...]]]


@dataclass
class SideFacts:
    """The answers for one side: label -> fingerprint, measure -> total, key -> unique."""

    fingerprints: dict[str, PartitionFingerprint]
    sums: dict[str, Number | None] = field(default_factory=dict)
    unique: dict[tuple[str, ...], bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """What one :func:`audit_facts` query asks of every side: the filter of the parts' periods
    (on the rows, before alias ``t``), the event time (name and kind), the parts, and the
    measures and keys (of one type on every side: a UNION would widen the others)."""

    where: str
    event_time: tuple[str | None, ColumnKind | None]
    parts: Sequence[Part]
    measures: Sequence[str]
    keys: Sequence[Sequence[str]]


def _select(dialect: Dialect, q: Question, i: int, rel: str, cols: Sequence[Column]) -> str:
    """One side's rows tagged with the side ``i``, their partition and row hash."""
    et, kind = q.event_time
    join, index = dialect.part_index(et, kind, q.parts) if q.parts and et else ("", "0")
    listed = [
        f"{i} AS __side",
        f"{index} AS __part",
        f"{dialect.row_hash(cols, 't')} AS __h",
    ]
    listed += [f"t.{dialect.quote(c)} AS __m{j}" for j, c in enumerate(q.measures)]
    listed += [
        f"t.{dialect.quote(c)} AS __k{j}_{n}"
        for j, key in enumerate(q.keys)
        for n, c in enumerate(key)
    ]
    return f"SELECT {', '.join(listed)} FROM (SELECT * FROM {rel} WHERE {q.where}) t{join}"


def audit_facts(
    dialect: Dialect,
    run: Run,
    sides: Sequence[tuple[str, Sequence[Column]]],
    q: Question,
) -> list[SideFacts]:
    """The facts of every side (its relation and columns) over ``q.where`` in one query."""
    aggs = ["count(*)", dialect.digest("__h")]
    aggs += [f"sum(__m{j})" for j in range(len(q.measures))]
    for j, key in enumerate(q.keys):
        names = [f"__k{j}_{n}" for n in range(len(key))]
        aggs.append(dialect.count_distinct(names))
        aggs.append(dialect.count_if(" AND ".join(f"{c} IS NOT NULL" for c in names)))
    selects = [_select(dialect, q, i, rel, cols) for i, (rel, cols) in enumerate(sides)]
    rows = run(
        f"SELECT __side, grouping(__part), __part, {', '.join(aggs)} "
        f"FROM ({' UNION ALL '.join(selects)}) u "
        "GROUP BY GROUPING SETS ((__side, __part), (__side))"
    )
    labels = [p[0] for p in q.parts] if q.parts and q.event_time[0] else [WHOLE]
    facts = [
        SideFacts(
            {label: PartitionFingerprint.empty() for label in labels},
            dict.fromkeys(q.measures),
            {tuple(k): True for k in q.keys},
        )
        for _ in sides
    ]
    for row in rows:
        got = facts[int(str(row[0]))]
        n, digest = int(str(row[3])), int(str(row[4]))
        if not int(str(row[1])):
            got.fingerprints[labels[int(str(row[2]))]] = PartitionFingerprint.of(n, digest)
            continue
        kinds = {c.name: c.kind for c in sides[int(str(row[0]))][1]}
        at = 5
        for c in q.measures:
            got.sums[c] = dialect.sum_value(row[at], kinds.get(c))
            at += 1
        for key in q.keys:
            distinct, full = int(str(row[at])), int(str(row[at + 1]))
            got.unique[tuple(key)] = n == distinct == full
            at += 2
    return facts


def answer_up_front(
    dialect: Dialect,
    run: Run,
    event_time: str | None,
    scope: AuditScope,
    sides: Sequence[tuple[str, list[Column]]],
) -> None:
    """Fills ``scope`` with the answers of one :func:`audit_facts` query over ``sides`` (each
    version's relation and columns), keyed as the engine core asks them."""
    et = event_time
    types = [{c.name: c.type for c in cols} for _, cols in sides]
    kinds = {dialect.kind_of(t.get(et or "", "")) for t in types}
    if not sides or len(kinds) != 1 or (scope.parts and not et):
        return  # nothing to batch (or versions the single questions must tell apart)

    # Only columns of one type on every side: a UNION would widen the others' sums.
    def same(c: str) -> bool:
        return len({t.get(c) for t in types}) == 1 and c in types[0]

    kind = kinds.pop()
    periods = [(s, e) for _, s, e in scope.parts] if scope.parts and et else None
    where = "TRUE" if periods is None or not et else dialect.in_periods(et, periods, kind)
    asked = "TRUE" if periods is None or not et else dialect.in_periods(et, periods, kind, "t")
    q = Question(
        where,
        (et, kind),
        scope.parts,
        [c for c in scope.measures if same(c)],
        [list(k) for k in scope.keys if all(same(c) for c in k)],
    )
    for (rel, _), got in zip(sides, audit_facts(dialect, run, sides, q), strict=True):
        scope.answers[("fp", rel, tuple(scope.parts))] = got.fingerprints
        for c, total in got.sums.items():
            scope.answers[("sum", rel, asked, c)] = (total,)
        for k, unique in got.unique.items():
            scope.answers[("unique", rel, asked, k)] = unique


@dataclass
class HeldRows:
    """The rows of an audit scope's partitions in the versions (``rels``: the published one
    first, the audit area's when the audit asks about it) read in one query and held by the
    driver (:func:`hold_rows`): each row's side (its index in ``rels``), the index of its
    partition in the scope's parts, its row hash, then the streamed columns (``select``, of
    the published version's ``columns``)."""

    rels: tuple[str, ...]
    table: Any  # pyarrow.Table: __side, __part, __h, then the streamed columns
    columns: list[Column]
    select: str

    def rows(self, rel: str, indices: Sequence[int]) -> Any:
        """The held rows of ``rel`` in the parts at ``indices``, as an Arrow stream of the
        streamed columns; None when ``rel`` is not held."""
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        if rel not in self.rels:
            return None
        t = self.table
        wanted = pa.array(list(indices), t.schema.field("__part").type)
        side = pc.equal(t.column("__side"), self.rels.index(rel))
        part = t.filter(pc.and_(side, pc.is_in(t.column("__part"), wanted)))
        part = part.drop_columns(["__side", "__part", "__h"])
        return pa.RecordBatchReader.from_batches(part.schema, part.to_batches())


def held_select(
    dialect: Dialect, i: int, rel: str, cols: Sequence[Column], q: Question, select: str
) -> str:
    """One side's rows for :func:`hold_rows`: tagged with the side ``i`` and their row hash,
    then the event time and ``select`` (the streamed columns of alias ``t``). The row's
    partition is found on the driver (:func:`_part_of`): a CASE of every partition in the
    query cost more than its rows (0.4-0.9 s against 0.1 s for 90 day partitions)."""
    et, _ = q.event_time
    assert et is not None
    return (
        f"SELECT {i} AS __side, {dialect.row_hash(cols, 't')} AS __h, "
        f"t.{dialect.quote(et)} AS __et, {select} "
        f"FROM (SELECT * FROM {rel} WHERE {q.where}) t"
    )


def _part_of(table: Any, parts: Sequence[Part], kind: ColumnKind | None) -> Any:
    """``table`` (the event time in ``__et``, every row inside one of ``parts``) with the index
    in ``parts`` of each row's partition in ``__part`` instead; None when the event time's
    type has no exact place among the parts' bounds here (then the engine aggregates)."""
    import numpy as np
    import pyarrow as pa

    et = table.column("__et")
    order = sorted(range(len(parts)), key=lambda i: parts[i][1])
    starts = [parts[i][1] for i in order]
    ends = [parts[i][2] for i in order]
    if any(a > b for a, b in zip(ends, starts[1:], strict=False)):
        return None  # overlapping parts: no single partition a row
    if kind == ColumnKind.DATE and pa.types.is_date32(et.type):
        if any(_utc(b).time() != dt.time(0) for b in starts + ends):
            return None
        epoch = dt.date(1970, 1, 1)
        bounds = [(_utc(b).date() - epoch).days for b in starts]
        values = et.cast(pa.int32()).to_numpy(zero_copy_only=False)
    elif kind in (ColumnKind.TIMESTAMP, ColumnKind.TIMESTAMP_TZ) and pa.types.is_timestamp(et.type):
        unit = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[et.type.unit]
        bounds = [_ticks(b, unit) for b in starts]
        values = et.cast(pa.int64()).to_numpy(zero_copy_only=False)
    else:
        return None
    at = np.searchsorted(np.asarray(bounds, dtype=np.int64), values, side="right") - 1
    index = np.asarray(order, dtype=np.int64)[np.clip(at, 0, len(order) - 1)]
    return table.drop_columns(["__et"]).add_column(1, "__part", pa.array(index))


def _utc(value: dt.datetime) -> dt.datetime:
    """A bound as an aware UTC datetime (a naive one is UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def _ticks(value: dt.datetime, per_second: int) -> int:
    """A bound in ``1 / per_second`` seconds since 1970-01-01 UTC, exactly."""
    delta = _utc(value) - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros * per_second // 1_000_000


def held_facts(
    dialect: Dialect,
    table: Any,
    sides: Sequence[tuple[str, Sequence[Column]]],
    q: Question,
) -> list[SideFacts]:
    """What :func:`audit_facts` answers, from rows held by the driver (see :class:`HeldRows`):
    the same fingerprints (row count and sum of the same row hashes modulo 2^64), exact sums
    of integers and decimals (floats by ``math.fsum``; NULL when no value), the same
    uniqueness test (no NULL in the key, every key once)."""
    import math
    from decimal import Context, Decimal, localcontext

    labels = [p[0] for p in q.parts]
    cols = table.column_names
    side_of = table.column("__side").to_pylist()
    part_of = table.column("__part").to_pylist()
    hashes = table.column("__h").to_pylist()
    counts: dict[tuple[int, int], list[int]] = {}
    for s, p, h in zip(side_of, part_of, hashes, strict=True):
        got = counts.setdefault((s, p), [0, 0])
        got[0] += 1
        got[1] += h
    facts: list[SideFacts] = []
    for i, (_, side_cols) in enumerate(sides):
        fps = {label: PartitionFingerprint.empty() for label in labels}
        for (s, p), (n, digest) in counts.items():
            if s == i:
                fps[labels[p]] = PartitionFingerprint.of(n, digest)
        mine = [j for j, s in enumerate(side_of) if s == i]
        kinds = {c.name: c.kind for c in side_cols}
        sums: dict[str, Number | None] = {}
        for c in q.measures:
            values = table.column(cols.index(c)).to_pylist()
            got_values = [values[j] for j in mine if values[j] is not None]
            if not got_values:
                sums[c] = None
            elif isinstance(got_values[0], float):
                sums[c] = dialect.sum_value(math.fsum(got_values), kinds.get(c))
            elif isinstance(got_values[0], Decimal):
                with localcontext(Context(prec=80)):
                    sums[c] = dialect.sum_value(sum(got_values, Decimal(0)), kinds.get(c))
            else:
                sums[c] = dialect.sum_value(sum(got_values), kinds.get(c))
        unique: dict[tuple[str, ...], bool] = {}
        for key in q.keys:
            columns = [table.column(cols.index(c)).to_pylist() for c in key]
            tuples = [tuple(col[j] for col in columns) for j in mine]
            full = [t for t in tuples if all(v is not None for v in t)]
            unique[tuple(key)] = len(full) == len(tuples) == len(set(full))
        facts.append(SideFacts(fps, sums, unique))
    return facts


def hold_rows(
    dialect: Dialect,
    fetch: Callable[[str], Any],
    event_time: str,
    scope: AuditScope,
    sides: Sequence[tuple[str, list[Column]]],
    select: str,
    read_as: Callable[[str, int], str] | None = None,
) -> bool:
    """Reads the rows of the scope's parts in ``sides`` (the versions the audit asks about, of
    the same columns: the published one, and the audit area's unless the run's fingerprints
    stand for it) in ONE query (``fetch``: SQL -> Arrow table) without aggregating them,
    answers the scope's questions from them (:func:`held_facts`) and keeps them in
    ``scope.held`` for the diff's streams (:meth:`HeldRows.rows`). For partitions so small
    that a query's fixed cost dwarfs their rows (a Spark job each: the fingerprint aggregate
    costs a shuffle besides), this is the query of the audit's questions. False when the
    rows' event times cannot be placed in the parts on the driver (a type without exact bounds
    here, overlapping parts). ``read_as``: the relation the query reads for a side's, given
    the number of partitions read (the same rows, read as the engine reads few rows best);
    the answers stay keyed by the side's."""
    cols = sides[0][1]
    kind = dialect.kind_of({c.name: c.type for c in cols}.get(event_time, ""))
    if kind not in (ColumnKind.DATE, ColumnKind.TIMESTAMP, ColumnKind.TIMESTAMP_TZ):
        return False  # no exact place among the parts' bounds on the driver (see _part_of)
    periods = [(s, e) for _, s, e in scope.parts]
    q = Question(
        dialect.in_periods(event_time, periods, kind),
        (event_time, kind),
        scope.parts,
        list(scope.measures),
        [list(k) for k in scope.keys],
    )
    sql = " UNION ALL ".join(
        held_select(dialect, i, read_as(rel, len(scope.parts)) if read_as else rel, cols, q, select)
        for i, (rel, _) in enumerate(sides)
    )
    table = _part_of(fetch(sql), scope.parts, kind)
    if table is None:
        return False
    asked = dialect.in_periods(event_time, periods, kind, "t")
    for (rel, _), got in zip(sides, held_facts(dialect, table, sides, q), strict=True):
        scope.answers[("fp", rel, tuple(scope.parts))] = got.fingerprints
        for c, total in got.sums.items():
            scope.answers[("sum", rel, asked, c)] = (total,)
        for k, unique in got.unique.items():
            scope.answers[("unique", rel, asked, k)] = unique
    scope.held = HeldRows(tuple(rel for rel, _ in sides), table, cols, select)
    return True
