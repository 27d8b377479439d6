"""What an audit found, model by model and partition by partition: ``AuditReport``,
``ModelAudit``, ``PartitionAudit`` (text, HTML, Arrow tables, JSON-able dicts)."""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .._arrow import html_table
from .._numbers import FLOAT, Number, delta, fmt, jsonable, pct
from .._tables import RowTable
from ..errors import NotFoundError
from ..fingerprints import PartitionFingerprint
from .diff import DiffResult
from .gates import GateResult

__all__ = ["TOP_PARTITIONS", "AuditReport", "MeasureValues", "ModelAudit", "PartitionAudit"]

#: a measure in one partition: (old, new, delta, pct_delta); exact (int, Decimal) for integer and
#: decimal columns, float for float columns (see backfill._numbers)
MeasureValues = tuple[Number | None, Number | None, Number | None, float | None]
#: how many partitions "moved most" lists per measure (text, HTML, changelog)
TOP_PARTITIONS = 5


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
    measures: Mapping[str, MeasureValues] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "start": _iso(self.start),
            "end": _iso(self.end),
            "rows_old": self.rows_old,
            "rows_new": self.rows_new,
            "identical": self.identical,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "measures": {k: [jsonable(x) for x in v] for k, v in self.measures.items()},
        }


@dataclass
class ModelAudit:
    """One model's audit: per-partition results, the diff of its differing partitions, gates."""

    model: str
    key: list[str]
    key_source: str  # unique_key | natural | all columns
    measures: list[str]
    partitions: list[PartitionAudit]
    diff: DiffResult | None  # None when every partition was identical (nothing moved)
    totals: dict[str, tuple[Number | None, Number | None]]
    gates: list[GateResult]
    published_fingerprints: dict[str, PartitionFingerprint]
    audit_fingerprints: dict[str, PartitionFingerprint]
    columns: list[str] = field(default_factory=list)
    #: measure -> how it is summed: "integer", "decimal" (exact) or "float" (approximate)
    measure_kinds: dict[str, str] = field(default_factory=dict)
    #: wall seconds of the audit's phases: "fingerprint scan" (in the engine, both versions),
    #: "key", "measure sums", "transfer" (differing partitions as Arrow from the engine) and
    #: "diff" (the C++ diff; its own phases are in ``diff.timings``). Not part of to_dict: a
    #: machine's timings are not a result.
    timings: dict[str, float] = field(default_factory=dict)
    #: the table the audit area was compared with instead of the published version (its
    #: location, password masked; ``bf.audit(against=...)``), None for the published version
    against: str | None = None
    #: the versions whose fingerprints the audit holds (``Engine.version``): ``"published"``,
    #: ``"area"``; recorded, so that publish re-reads only a side that moved since
    versions: dict[str, str] = field(default_factory=dict)

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
        lines = self._describe()
        if self.against is not None:
            lines.insert(
                0, f"{self.model} compared with {self.against} (old), not the published version"
            )
        return lines

    def _describe(self) -> list[str]:
        added, removed, changed = self._counts()
        n, d = len(self.partitions), len(self.differing)
        if not d:
            return [f"{self.model}: all {n} partition(s) identical"]
        lines = [
            f"{self.model}: {d} of {n} partition(s) differ -- rows: {changed:,} changed, "
            f"{added:,} added, {removed:,} removed (key {', '.join(self.key)})"
        ]
        cols = self.changed_columns
        if cols:
            lines.append(
                "  changed columns: " + ", ".join(f"{c} ({k:,} rows)" for c, k in cols.items())
            )
        moved, same = self._totals_text("  {m}: {o} -> {nw}{pct}")
        lines.extend(moved)
        if same:
            lines.append(f"  unchanged totals: {', '.join(same)}")
        for m in self.measures:
            top = self.top_partitions(m)
            if not top:
                continue
            lines.append(f"  {m}: the {len(top)} partition(s) that moved most (old -> new, delta)")
            width = max(len(p.label) for p, _ in top)
            for p, (old, new, dv, pc) in top:
                pct_text = "" if pc is None else f" ({pc:+.2f}%)"
                lines.append(
                    f"    {p.label.ljust(width)}  {fmt(old)} -> {fmt(new)}, "
                    f"{fmt(dv, sign=True)}{pct_text}"
                )
        return lines

    def _kind_note(self, m: str) -> str:
        return " (float, approximate)" if self.measure_kinds.get(m) == FLOAT else ""

    def total_change(self, m: str) -> tuple[Number | None, float | None]:
        """(new - old, percent) of measure ``m``'s total, exact for integers and decimals."""
        old, new = self.totals[m]
        return delta(old or 0, new or 0), pct(old or 0, new or 0)

    def _totals_text(self, template: str) -> tuple[list[str], list[str]]:
        """(``template`` filled for each measure whose total moved, names of those that did not)."""
        moved: list[str] = []
        same: list[str] = []
        for m, (old, new) in self.totals.items():
            d, pc = self.total_change(m)
            if not d:
                same.append(m)
                continue
            text = f" ({pc:+.2f}%)" if pc is not None else ""
            moved.append(
                template.format(
                    m=m + self._kind_note(m), o=fmt(old or 0), nw=fmt(new or 0), pct=text
                )
            )
        return moved, same

    def top_partitions(
        self,
        measure: str,
        n: int = TOP_PARTITIONS,
    ) -> list[tuple[PartitionAudit, MeasureValues]]:
        """The ``n`` partitions whose ``measure`` moved most (largest ``|delta|``, ties in
        partition order), each with its (old, new, delta, pct); partitions that did not move
        are left out."""
        moved = [
            (p, p.measures[measure])
            for p in self.partitions
            if measure in p.measures and p.measures[measure][2]
        ]
        moved.sort(key=lambda pv: _magnitude(pv[1][2]), reverse=True)
        return moved[:n]

    def _top_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {
            m: [
                {
                    "partition": p.label,
                    "start": _iso(p.start),
                    "old": jsonable(o),
                    "new": jsonable(nw),
                    "delta": jsonable(d),
                    "pct_delta": pc,
                }
                for p, (o, nw, d, pc) in self.top_partitions(m)
            ]
            for m in self.measures
        }

    def to_dict(self) -> dict[str, Any]:
        added, removed, changed = self._counts()
        return {
            "model": self.model,
            **({} if self.against is None else {"against": self.against}),
            "key": self.key,
            "key_source": self.key_source,
            "measures": self.measures,
            "partitions_total": len(self.partitions),
            "partitions_differing": len(self.differing),
            "rows_added": added,
            "rows_removed": removed,
            "rows_changed": changed,
            "changed_columns": self.changed_columns,
            "measure_kinds": self.measure_kinds,
            "totals": {m: [jsonable(x) for x in v] for m, v in self.totals.items()},
            "total_deltas": {
                m: dict(
                    zip(
                        ("delta", "pct_delta"),
                        (jsonable(x) for x in self.total_change(m)),
                        strict=True,
                    )
                )
                for m in self.totals
            },
            "top_partitions": self._top_dict(),
            "gates": [g.to_dict() for g in self.gates],
            "passed": self.passed,
            "partitions": [p.to_dict() for p in self.partitions],
            "audit_fingerprints": {k: fp.encode() for k, fp in self.audit_fingerprints.items()},
            **({"versions": dict(self.versions)} if self.versions else {}),
        }

    def timings_line(self) -> str:
        """``fingerprint scan 1.20s, key 0.31s, ...; total 2.10s``."""
        total = sum(self.timings.values())
        return ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()) + f"; total {total:.2f}s"

    def summary_line(self) -> str:
        added, removed, changed = self._counts()
        n, d = len(self.partitions), len(self.differing)
        if not d:
            return f"{self.model}: {n} partition(s), all identical"
        parts = [
            f"{self.model}: {d} of {n} partition(s) differ; rows ~{changed:,} changed "
            f"+{added:,} added -{removed:,} removed"
        ]
        cols = self.changed_columns
        if cols:
            parts.append("columns " + ", ".join(f"{c} ({k:,})" for c, k in cols.items()))
        moved, same = self._totals_text("{m} {o} -> {nw}{pct}")
        parts.extend(moved)
        if same:
            parts.append(f"unchanged: {', '.join(same)}")
        return "; ".join(parts)


class AuditReport:
    """The audit of a backfill: a :class:`ModelAudit` (with its ``DiffResult``) per model and
    the gate results. ``report["model"]`` gets one model; ``.summary`` (also the Arrow export
    and ``to_pandas()``), ``.partitions`` and ``.deltas`` are tables."""

    def __init__(
        self,
        backfill_id: str,
        audit_id: str,
        created_at: str,
        models: Sequence[ModelAudit],
        *,
        recorded: bool = True,
    ) -> None:
        self.backfill_id = backfill_id
        self.audit_id = audit_id
        self.created_at = created_at
        self.models: dict[str, ModelAudit] = {m.model: m for m in models}
        #: whether the ledger holds it (an audit against other tables is not: publish needs
        #: the one against the published version)
        self.recorded = recorded

    @property
    def against(self) -> dict[str, str]:
        """model -> the table it was compared with instead of the published version (masked)."""
        return {m.model: m.against for m in self.models.values() if m.against is not None}

    @property
    def identical(self) -> bool:
        """Whether every partition of every model was identical on both sides."""
        return not any(m.differing for m in self.models.values())

    def __getitem__(self, model: str) -> ModelAudit:
        try:
            return self.models[model]
        except KeyError:
            raise NotFoundError(
                f"model {model!r} was not audited (audited: {', '.join(self.models)})"
            ) from None

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
            rows.append(
                (
                    m.model,
                    ",".join(m.key),
                    len(m.partitions),
                    len(m.differing),
                    changed,
                    added,
                    removed,
                    ",".join(m.changed_columns),
                    m.passed,
                )
            )
        return RowTable(
            [
                "model",
                "key",
                "partitions",
                "differing",
                "rows_changed",
                "rows_added",
                "rows_removed",
                "changed_columns",
                "gates_passed",
            ],
            rows,
            caption=f"audit of {self.backfill_id}",
        )

    @property
    def partitions(self) -> RowTable:
        rows = [
            (
                m.model,
                p.label,
                p.start,
                p.end,
                p.rows_old,
                p.rows_new,
                p.identical,
                p.added,
                p.removed,
                p.changed,
            )
            for m in self.models.values()
            for p in m.partitions
        ]
        return RowTable(
            [
                "model",
                "partition",
                "start",
                "end",
                "rows_old",
                "rows_new",
                "identical",
                "added",
                "removed",
                "changed",
            ],
            rows,
        )

    @property
    def deltas(self) -> RowTable:
        """Per (model, differing partition, measure): old, new, delta, pct_delta."""
        rows = [
            (m.model, p.label, p.start, name, *vals)
            for m in self.models.values()
            for p in m.differing
            for name, vals in p.measures.items()
        ]
        return RowTable(
            ["model", "partition", "start", "measure", "old", "new", "delta", "pct_delta"], rows
        )

    @property
    def timings(self) -> RowTable:
        """Per (model, phase): wall seconds (see :attr:`ModelAudit.timings`)."""
        rows = [
            (m.model, phase, seconds)
            for m in self.models.values()
            for phase, seconds in m.timings.items()
        ]
        return RowTable(["model", "phase", "seconds"], rows, caption="audit timings")

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.summary.__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        return self.summary.to_pandas()

    def to_dict(self) -> dict[str, Any]:
        return {
            "backfill_id": self.backfill_id,
            "audit_id": self.audit_id,
            "created_at": self.created_at,
            "passed": self.passed,
            **({"against": self.against, "recorded": False} if not self.recorded else {}),
            "models": [m.to_dict() for m in self.models.values()],
        }

    # -- text and HTML -------------------------------------------------------------------------
    def __str__(self) -> str:
        verdict = "gates passed" if self.passed else "GATES FAILED"
        lines = [f"audit of {self.backfill_id}: {verdict}"]
        if self.against:
            lines[0] = (
                f"audit of {self.backfill_id} against other tables: "
                f"{'identical' if self.identical else 'DIFFERENT'}, {verdict}"
            )
            lines.append(
                "  (not recorded: publishing needs the audit against the published version, "
                f"backfill audit {self.backfill_id})"
            )
        lines += [f"  {line}" for m in self.models.values() for line in m.describe()]
        lines += [f"  {g}" for g in self.gates]
        return "\n".join(lines)

    def __repr__(self) -> str:
        changed = sum(1 for m in self.models.values() if m.differing)
        return (
            f"<AuditReport {self.backfill_id}: {changed} of {len(self.models)} model(s) "
            f"changed, gates {'passed' if self.passed else 'FAILED'}>"
        )

    def _repr_html_(self) -> str | None:
        if sum(len(m.partitions) for m in self.models.values()) > 20000:
            return None
        e = html.escape
        verdict = (
            "<span style='color:#2a7'>gates passed</span>"
            if self.passed
            else "<span style='color:#c33'>GATES FAILED</span>"
        )
        parts = [
            f"<div class='backfill-audit'><p><b>audit of {e(self.backfill_id)}</b>: {verdict}</p>"
        ]
        if self.against:
            compared = "; ".join(
                f"{e(m)} with <code>{e(loc)}</code>" for m, loc in self.against.items()
            )
            parts.append(
                f"<p>compared (old) with other tables, not the published version: {compared}. "
                "Not recorded: publishing needs the audit against the published version.</p>"
            )
        parts.append(self.summary._repr_html_() or "")
        if self.gates:
            parts.append(
                html_table(
                    ["model", "gate", "result", "reason"],
                    [
                        [g.model, g.gate, "pass" if g.passed else "FAIL", g.reason]
                        for g in self.gates
                    ],
                    caption="gates",
                )
            )
        for m in self.models.values():
            if m.diff is None:
                continue
            parts.append(f"<details><summary>{e(m.summary_line())}</summary>")
            parts.append(_moved_html(m))
            inner = m.diff._repr_html_()
            parts.append(inner if inner else f"<pre>{e(str(m.diff))}</pre>")
            parts.append("</details>")
        parts.append("</div>")
        return "".join(parts)


def _magnitude(value: Number | None) -> Decimal:
    """|value| as a Decimal (exact for floats too), so that any kind sorts; NaN as 0."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return Decimal(0)
    return abs(Decimal(value))


def _moved_html(m: ModelAudit) -> str:
    """Per measure: a sparkline of the delta in every partition and the partitions that moved
    most (old, new, delta, %)."""
    out = []
    for measure in m.measures:
        top = m.top_partitions(measure)
        if not top:
            continue
        deltas = [p.measures[measure][2] if measure in p.measures else 0 for p in m.partitions]
        caption = (
            f"{html.escape(measure)}: the {len(top)} partition(s) that moved most "
            f"{_sparkline(deltas, f'{measure}: delta per partition')}"
        )
        rows = [
            [p.label, fmt(o), fmt(nw), fmt(d, sign=True), "" if pc is None else f"{pc:+.2f}%"]
            for p, (o, nw, d, pc) in top
        ]
        table = html_table(["partition", "old", "new", "delta", "%"], rows, caption="")
        out.append(f"<p>{caption}</p>{table}")
    return "".join(out)


def _sparkline(
    values: Sequence[Number | None], title: str, width: int = 240, height: int = 28
) -> str:
    """An inline SVG sparkline: one bar per value up (green) or down (red) from a zero line;
    scaled to the largest |value| (floats for drawing only)."""
    nums = [float(v or 0) for v in values]
    top = max((abs(v) for v in nums), default=0.0) or 1.0
    bar = width / max(len(nums), 1)
    mid = height / 2
    shapes = [f"<line x1='0' y1='{mid}' x2='{width}' y2='{mid}' stroke='#bbb'/>"]
    for i, v in enumerate(nums):
        if not v:
            continue
        h = max(abs(v) / top * (mid - 1), 0.5)
        y = mid - h if v > 0 else mid
        color = "#2a7" if v > 0 else "#c33"
        shapes.append(
            f"<rect x='{i * bar:.2f}' y='{y:.2f}' width='{max(bar - 0.5, 0.5):.2f}' "
            f"height='{h:.2f}' fill='{color}'/>"
        )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"role='img' style='vertical-align:middle'><title>{html.escape(title)}</title>"
        f"{''.join(shapes)}</svg>"
    )


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()
