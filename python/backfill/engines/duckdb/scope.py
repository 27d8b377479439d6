"""The DuckDB engine's audit scope: the measure sums of a version come from the scan that
fingerprints it (see :meth:`Engine.audit_scope <backfill.engines.base.Engine.audit_scope>`).

The audit fingerprints the published version of every backfilled partition (one scan of all
columns), then sums its measures over the same periods (another scan). Inside the scope, the
fingerprint scan sums the announced measures too, and :meth:`measure_sums` over exactly the
scope's periods is answered from it. Only integer and decimal measures: their sums are exact
however they are grouped; a float's would round differently from one sum over the rows, so a
float measure (or any other question) still goes to the table.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb

from ..._numbers import Number
from ..base import ColumnKind, Part, PartitionFingerprint, Period
from .sql import fingerprint_parts, fingerprint_parts_sums, kind_of

__all__ = ["AuditScope", "Scopes"]

_EXACT = (ColumnKind.INTEGER, ColumnKind.DECIMAL)


@dataclass
class AuditScope:
    """One audit_scope block: its model, partitions and announced measures, and the sums the
    fingerprint scans found (relation -> measure -> sum over the partitions)."""

    model: str
    parts: list[Part]
    measures: list[str]
    sums: dict[str, dict[str, Number | None]] = field(default_factory=dict)

    def fingerprints(
        self,
        cur: duckdb.DuckDBPyConnection,
        relation: str,
        event_time: str,
    ) -> dict[str, PartitionFingerprint]:
        """The partitions' fingerprints of ``relation``, keeping its exact measures' sums."""
        desc = cur.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        kinds = {str(r[0]): kind_of(str(r[1])) for r in desc}
        exact = [c for c in self.measures if kinds.get(c) in _EXACT]
        if not exact:
            return fingerprint_parts(cur, relation, event_time, self.parts, list(kinds))
        fps, totals = fingerprint_parts_sums(
            cur, relation, event_time, self.parts, list(kinds), exact
        )
        self.sums[relation] = dict(zip(exact, totals))
        return fps

    def measure_sums(
        self, relation: str, measures: Sequence[str], periods: Sequence[Period] | None
    ) -> dict[str, Number | None] | None:
        """The sums of ``measures`` over ``periods`` when a fingerprint scan found them all."""
        found = self.sums.get(relation)
        if (
            found is None
            or periods is None
            or list(periods) != [(s, e) for _, s, e in self.parts]
            or any(c not in found for c in measures)
        ):
            return None
        return {c: found[c] for c in measures}


class Scopes:
    """The open audit scope of each thread (an engine may serve several threads)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def open(self, model: str, parts: Sequence[Part], measures: Sequence[str]) -> None:
        self._local.scope = AuditScope(model, list(parts), list(measures)) if parts else None

    def close(self) -> None:
        self._local.scope = None

    def get(self, model: str, parts: Sequence[Part] | None = None) -> AuditScope | None:
        """The open scope of ``model`` (over exactly ``parts``, when given), or None."""
        scope: AuditScope | None = getattr(self._local, "scope", None)
        if (
            scope is None
            or scope.model != model
            or (parts is not None and list(parts) != scope.parts)
        ):
            return None
        return scope
