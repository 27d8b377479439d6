"""What an audit found, model by model and partition by partition: ``AuditReport``,
``ModelAudit``, ``PartitionAudit`` (text, HTML, Arrow tables, JSON-able dicts)."""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._arrow import html_table
from .._tables import RowTable
from ..errors import NotFoundError
from .diff import DiffResult
from .gates import GateResult

__all__ = ["AuditReport", "ModelAudit", "PartitionAudit"]


@dataclass(frozen=True)
class PartitionAudit:
    label: str
    start: dt.datetime | None
    end: dt.datetime | None
    rows_old: int
    rows_new: int
    identical: bool
    added: int = 0
    removed: int = 0
    changed: int = 0
    #: measure -> (old, new, delta, pct_delta) for differing partitions
    measures: Mapping[str, tuple[float | None, float | None, float | None, float | None]] = \
        field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "start": _iso(self.start), "end": _iso(self.end),
                "rows_old": self.rows_old, "rows_new": self.rows_new,
                "identical": self.identical, "added": self.added, "removed": self.removed,
                "changed": self.changed, "measures": {k: list(v) for k, v in self.measures.items()}}


@dataclass
class ModelAudit:
    """One model's audit: per-partition results, the diff of its differing partitions, gates."""

    model: str
    key: list[str]
    key_source: str  # unique_key | natural | all columns
    measures: list[str]
    partitions: list[PartitionAudit]
    diff: DiffResult | None  # None when every partition was identical (nothing moved)
    totals: dict[str, tuple[float | None, float | None]]
    gates: list[GateResult]
    published_fingerprints: dict[str, str]
    audit_fingerprints: dict[str, str]
    columns: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def differing(self) -> list[PartitionAudit]:
        return [p for p in self.partitions if not p.identical]

    @property
    def changed_columns(self) -> dict[str, int]:
        return self.diff.changed_columns() if self.diff is not None else {}

    def _counts(self) -> tuple[int, int, int]:
        s = self.diff.summary if self.diff is not None else None
        return (s.added, s.removed, s.changed) if s else (0, 0, 0)

    def describe(self) -> list[str]:
        """A few short lines: partitions, rows, columns, measure totals."""
        added, removed, changed = self._counts()
        n, d = len(self.partitions), len(self.differing)
        if not d:
            return [f"{self.model}: all {n} partition(s) identical"]
        lines = [f"{self.model}: {d} of {n} partition(s) differ -- rows: {changed:,} changed, "
                 f"{added:,} added, {removed:,} removed (key {', '.join(self.key)})"]
        cols = self.changed_columns
        if cols:
            lines.append("  changed columns: " + ", ".join(f"{c} ({k:,} rows)"
                                                           for c, k in cols.items()))
        moved, same = self._totals_text("  {m}: {o:,.2f} -> {nw:,.2f}{pct}")
        lines.extend(moved)
        if same:
            lines.append(f"  unchanged totals: {', '.join(same)}")
        return lines

    def _totals_text(self, template: str) -> tuple[list[str], list[str]]:
        """(``template`` filled for each measure whose total moved, names of those that did not)."""
        moved: list[str] = []
        same: list[str] = []
        for m, (old, new) in self.totals.items():
            o, nw = float(old or 0), float(new or 0)
            if o == nw:
                same.append(m)
                continue
            pct = f" ({(nw - o) / abs(o) * 100:+.2f}%)" if o else ""
            moved.append(template.format(m=m, o=o, nw=nw, pct=pct))
        return moved, same

    def to_dict(self) -> dict[str, Any]:
        added, removed, changed = self._counts()
        return {
            "model": self.model, "key": self.key, "key_source": self.key_source,
            "measures": self.measures,
            "partitions_total": len(self.partitions), "partitions_differing": len(self.differing),
            "rows_added": added, "rows_removed": removed, "rows_changed": changed,
            "changed_columns": self.changed_columns,
            "totals": {m: list(v) for m, v in self.totals.items()},
            "gates": [g.to_dict() for g in self.gates], "passed": self.passed,
            "partitions": [p.to_dict() for p in self.partitions],
            "audit_fingerprints": self.audit_fingerprints,
        }

    def summary_line(self) -> str:
        added, removed, changed = self._counts()
        n, d = len(self.partitions), len(self.differing)
        if not d:
            return f"{self.model}: {n} partition(s), all identical"
        parts = [f"{self.model}: {d} of {n} partition(s) differ; rows ~{changed:,} changed "
                 f"+{added:,} added -{removed:,} removed"]
        cols = self.changed_columns
        if cols:
            parts.append("columns " + ", ".join(f"{c} ({k:,})" for c, k in cols.items()))
        moved, same = self._totals_text("{m} {o:,.2f} -> {nw:,.2f}{pct}")
        parts.extend(moved)
        if same:
            parts.append(f"unchanged: {', '.join(same)}")
        return "; ".join(parts)


class AuditReport:
    """The audit of a backfill: a :class:`ModelAudit` (with its ``DiffResult``) per model and
    the gate results. ``report["model"]`` gets one model; ``.summary`` (also the Arrow export
    and ``to_pandas()``), ``.partitions`` and ``.deltas`` are tables."""

    def __init__(self, backfill_id: str, audit_id: str, created_at: str,
                 models: Sequence[ModelAudit]) -> None:
        self.backfill_id = backfill_id
        self.audit_id = audit_id
        self.created_at = created_at
        self.models: dict[str, ModelAudit] = {m.model: m for m in models}

    def __getitem__(self, model: str) -> ModelAudit:
        try:
            return self.models[model]
        except KeyError:
            raise NotFoundError(f"model {model!r} was not audited (audited: "
                                f"{', '.join(self.models)})") from None

    @property
    def gates(self) -> list[GateResult]:
        return [g for m in self.models.values() for g in m.gates]

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    def diff(self, model: str) -> DiffResult | None:
        return self[model].diff

    # -- tables --------------------------------------------------------------------------------
    @property
    def summary(self) -> RowTable:
        rows = []
        for m in self.models.values():
            added, removed, changed = m._counts()
            rows.append((m.model, ",".join(m.key), len(m.partitions), len(m.differing), changed,
                         added, removed, ",".join(m.changed_columns), m.passed))
        return RowTable(["model", "key", "partitions", "differing", "rows_changed", "rows_added",
                         "rows_removed", "changed_columns", "gates_passed"], rows,
                        caption=f"audit of {self.backfill_id}")

    @property
    def partitions(self) -> RowTable:
        rows = [(m.model, p.label, p.start, p.end, p.rows_old, p.rows_new, p.identical, p.added,
                 p.removed, p.changed) for m in self.models.values() for p in m.partitions]
        return RowTable(["model", "partition", "start", "end", "rows_old", "rows_new",
                         "identical", "added", "removed", "changed"], rows)

    @property
    def deltas(self) -> RowTable:
        """Per (model, differing partition, measure): old, new, delta, pct_delta."""
        rows = [(m.model, p.label, p.start, name, *vals) for m in self.models.values()
                for p in m.differing for name, vals in p.measures.items()]
        return RowTable(["model", "partition", "start", "measure", "old", "new", "delta",
                         "pct_delta"], rows)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.summary.__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        return self.summary.to_pandas()

    def to_dict(self) -> dict[str, Any]:
        return {"backfill_id": self.backfill_id, "audit_id": self.audit_id,
                "created_at": self.created_at, "passed": self.passed,
                "models": [m.to_dict() for m in self.models.values()]}

    # -- text and HTML -------------------------------------------------------------------------
    def __str__(self) -> str:
        verdict = "gates passed" if self.passed else "GATES FAILED"
        lines = [f"audit of {self.backfill_id}: {verdict}"]
        lines += [f"  {line}" for m in self.models.values() for line in m.describe()]
        lines += [f"  {g}" for g in self.gates]
        return "\n".join(lines)

    def __repr__(self) -> str:
        changed = sum(1 for m in self.models.values() if m.differing)
        return (f"<AuditReport {self.backfill_id}: {changed} of {len(self.models)} model(s) "
                f"changed, gates {'passed' if self.passed else 'FAILED'}>")

    def _repr_html_(self) -> str | None:
        if sum(len(m.partitions) for m in self.models.values()) > 20000:
            return None
        e = html.escape
        verdict = ("<span style='color:#2a7'>gates passed</span>" if self.passed else
                   "<span style='color:#c33'>GATES FAILED</span>")
        parts = [f"<div class='backfill-audit'><p><b>audit of {e(self.backfill_id)}</b>: "
                 f"{verdict}</p>", self.summary._repr_html_() or ""]
        if self.gates:
            parts.append(html_table(["model", "gate", "result", "reason"],
                                    [[g.model, g.gate, "pass" if g.passed else "FAIL", g.reason]
                                     for g in self.gates], caption="gates"))
        for m in self.models.values():
            if m.diff is None:
                continue
            parts.append(f"<details><summary>{e(m.summary_line())}</summary>")
            inner = m.diff._repr_html_()
            parts.append(inner if inner else f"<pre>{e(str(m.diff))}</pre>")
            parts.append("</details>")
        parts.append("</div>")
        return "".join(parts)


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()
