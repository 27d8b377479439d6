"""An audit's questions about one model answered in one Spark job.

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

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..._numbers import Number
from ..base import WHOLE, Area, ColumnKind, Part, PartitionFingerprint, Period, project_model
from .sql import arrow_rows, kind_of, part_index, quote, row_hash

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from ...model.project import Model, Project

__all__ = ["AuditBatching", "Side", "SideFacts", "audit_facts"]


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
    event_time: str | None,
    kind: ColumnKind,
    parts: Sequence[Part],
    measures: Sequence[str],
    keys: Sequence[Sequence[str]],
) -> list[SideFacts]:
    """The facts of every side over ``where`` (the parts' periods) in one Spark job.
    ``measures`` and ``keys`` must have the same type on every side (a UNION would widen it)."""
    join, index = part_index(event_time, kind, parts)
    selects = []
    for i, side in enumerate(sides):
        cols = [f"{i} AS __side", f"{index} AS __part", f"{row_hash(list(side.types), 't')} AS __h"]
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
    labels = [p[0] for p in parts] if parts and event_time else [WHOLE]
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


class AuditBatching:
    """:meth:`audit_scope` of :class:`~.engine.SparkEngine` (which provides the rest): the
    answers of one audit_facts job, per thread, served until the scope ends."""

    _scope: threading.local

    if TYPE_CHECKING:  # pragma: no cover

        @property
        def small(self) -> SparkSession: ...
        def _job(self, description: str) -> SparkSession: ...
        def source(self, project: Project, model: str, area: Area) -> Any: ...
        def _where_periods(self, m: Model, rel: Any, periods: Sequence[Period] | None) -> str: ...

    def _answer(self, *question: object) -> Any:
        """The scope's answer to ``question``, or None (ask the tables)."""
        answers: dict[tuple[object, ...], Any] | None = getattr(self._scope, "answers", None)
        return None if answers is None else answers.get(question)

    @contextlib.contextmanager
    def audit_scope(
        self,
        project: Project,
        model: str,
        areas: Sequence[Area],
        parts: Sequence[Part],
        measures: Sequence[str],
        keys: Sequence[Sequence[str]],
    ) -> Iterator[None]:
        m = project_model(project, model)
        rels = [r for r in (self.source(project, model, a) for a in areas) if r is not None]
        et = m.event_time
        kinds = {kind_of(r.types.get(et or "", "")) for r in rels}
        if not rels or len(kinds) != 1 or (parts and not et):
            yield  # nothing to batch (or versions the single questions must tell apart)
            return
        # Only columns of one type on every side: a UNION would widen the others' sums.
        same = [
            c for c in measures if len({r.types.get(c) for r in rels}) == 1 and c in rels[0].types
        ]
        ok_keys = [
            list(k)
            for k in keys
            if all(len({r.types.get(c) for r in rels}) == 1 and c in rels[0].types for c in k)
        ]
        periods = [(s, e) for _, s, e in parts] if parts and et else None
        where = self._where_periods(m, rels[0], periods)
        self._job(f"backfill: audit facts of {model}")
        facts = audit_facts(
            self.small,
            [Side(r.sql, r.types) for r in rels],
            where,
            et,
            kinds.pop(),
            parts,
            same,
            ok_keys,
        )
        answers: dict[tuple[object, ...], Any] = {}
        for rel, got in zip(rels, facts):
            answers[("fp", rel.sql, tuple(parts))] = got.fingerprints
            for c, total in got.sums.items():
                answers[("sum", rel.sql, where, c)] = (total,)
            for k, unique in got.unique.items():
                answers[("unique", rel.sql, where, k)] = unique
        self._scope.answers = answers
        try:
            yield
        finally:
            self._scope.answers = None
