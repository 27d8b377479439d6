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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..._numbers import Number
from ...fingerprints import PartitionFingerprint
from ..base import WHOLE, Column, ColumnKind, Part
from .dialect import Dialect

if TYPE_CHECKING:  # pragma: no cover
    from .core import AuditScope

__all__ = ["SideFacts", "answer_up_front", "audit_facts"]

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
        f"{dialect.row_hash([c.name for c in cols], 't')} AS __h",
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
