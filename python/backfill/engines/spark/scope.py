"""The Spark engine's audit scope: an audit's questions about one model answered in one job.

An audit asks, for the published version and the audit branch of a model: per-partition
fingerprints, measure totals over the backfilled periods, and whether a candidate key is unique
there. Asked one by one these are ~10 Spark jobs a model, each a fixed cost of planning,
scheduling and an Iceberg table load that dwarfs the scan on partition-sized data. Here both
versions are scanned in one query (``UNION ALL`` of the two relations, each row tagged with its
side and partition) and aggregated with ``GROUPING SETS ((side, partition), (side))``: the first
set gives the fingerprints, the second the totals and distinct counts. The expressions are the
ones the single questions use (the same row hash over each side's own columns, the same sums of
the same column types), so the answers are equal to theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from ..._numbers import Number
from ...fingerprints import PartitionFingerprint
from ..base import WHOLE, Column, ColumnKind, Part
from ..sql import AuditScope
from .sql import DIALECT, arrow_rows, kind_of, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from ...model.project import Model

__all__ = ["Side", "SideFacts", "answer_up_front", "audit_facts"]


@dataclass(frozen=True)
class Side:
    """One version of the model: its rows as Spark SQL, and its column types."""

    sql: str
    types: dict[str, str]


@dataclass
class SideFacts:
    """The answers for one side: label -> fingerprint, measure -> total, key -> unique."""

    fingerprints: dict[str, PartitionFingerprint]
    sums: dict[str, Number | None] = field(default_factory=dict)
    unique: dict[tuple[str, ...], bool] = field(default_factory=dict)


def audit_facts(
    spark: SparkSession,
    sides: Sequence[Side],
    where: str,
    event_time: tuple[str | None, ColumnKind],
    parts: Sequence[Part],
    measures: Sequence[str],
    keys: Sequence[Sequence[str]],
) -> list[SideFacts]:
    """The facts of every side over ``where`` (the parts' periods) in one Spark job.
    ``measures`` and ``keys`` must have the same type on every side (a UNION would widen it)."""
    et, kind = event_time
    join, index = DIALECT.part_index(et, kind, parts) if parts and et else ("", "0")
    selects = []
    for i, side in enumerate(sides):
        cols = [
            f"{i} AS __side",
            f"{index} AS __part",
            f"{DIALECT.row_hash(list(side.types), 't')} AS __h",
        ]
        cols += [f"t.{quote(c)} AS __m{j}" for j, c in enumerate(measures)]
        cols += [
            f"t.{quote(c)} AS __k{j}_{n}" for j, key in enumerate(keys) for n, c in enumerate(key)
        ]
        selects.append(
            f"SELECT {', '.join(cols)} FROM (SELECT * FROM {side.sql} WHERE {where}) t{join}"
        )
    aggs = ["count(*)", "CAST(coalesce(sum(CAST(__h AS DECIMAL(38, 0))), 0) AS STRING)"]
    aggs += [f"sum(__m{j})" for j in range(len(measures))]
    for j, key in enumerate(keys):
        names = [f"__k{j}_{n}" for n in range(len(key))]
        aggs.append(f"count(DISTINCT {', '.join(names)})")
        aggs.append(f"count_if({' AND '.join(f'{c} IS NOT NULL' for c in names)})")
    rows = arrow_rows(
        spark,
        f"SELECT __side, grouping(__part), __part, {', '.join(aggs)} "
        f"FROM ({' UNION ALL '.join(selects)}) "
        "GROUP BY GROUPING SETS ((__side, __part), (__side))",
    )
    labels = [p[0] for p in parts] if parts and et else [WHOLE]
    facts = [
        SideFacts(
            {label: PartitionFingerprint.empty() for label in labels},
            dict.fromkeys(measures),
            {tuple(k): True for k in keys},
        )
        for _ in sides
    ]
    for row in rows:
        at_side, total, part, n, digest = (
            int(str(row[0])),
            int(str(row[1])),
            row[2],
            int(str(row[3])),
            int(str(row[4])),
        )
        got = facts[at_side]
        if not total:
            got.fingerprints[labels[int(str(part))]] = PartitionFingerprint.of(n, digest)
            continue
        at = 5
        for c in measures:
            got.sums[c] = cast("Number | None", row[at])
            at += 1
        for key in keys:
            distinct, full = int(str(row[at])), int(str(row[at + 1]))
            got.unique[tuple(key)] = n == distinct == full
            at += 2
    return facts


def answer_up_front(
    spark: SparkSession, m: Model, scope: AuditScope, sides: Sequence[tuple[str, list[Column]]]
) -> None:
    """Fills ``scope`` with the answers of one :func:`audit_facts` job over ``sides`` (each
    version's relation and columns), keyed as the engine core asks them."""
    et = m.event_time
    rels = [Side(rel, {c.name: c.type for c in cols}) for rel, cols in sides]
    kinds = {kind_of(r.types.get(et or "", "")) for r in rels}
    if not rels or len(kinds) != 1 or (scope.parts and not et):
        return  # nothing to batch (or versions the single questions must tell apart)

    # Only columns of one type on every side: a UNION would widen the others' sums.
    def same(c: str) -> bool:
        return len({r.types.get(c) for r in rels}) == 1 and c in rels[0].types

    measures = [c for c in scope.measures if same(c)]
    keys = [list(k) for k in scope.keys if all(same(c) for c in k)]
    kind = kinds.pop()
    periods = [(s, e) for _, s, e in scope.parts] if scope.parts and et else None
    where = "TRUE" if periods is None or not et else DIALECT.in_periods(et, periods, kind)
    asked = "TRUE" if periods is None or not et else DIALECT.in_periods(et, periods, kind, "t")
    facts = audit_facts(spark, rels, where, (et, kind), scope.parts, measures, keys)
    for rel, got in zip(rels, facts, strict=True):
        scope.answers[("fp", rel.sql, tuple(scope.parts))] = got.fingerprints
        for c, total in got.sums.items():
            scope.answers[("sum", rel.sql, asked, c)] = (total,)
        for k, unique in got.unique.items():
            scope.answers[("unique", rel.sql, asked, k)] = unique
