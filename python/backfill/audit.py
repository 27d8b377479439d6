"""Audit: what a backfill changes, model by model and partition by partition, before publishing.

>>> report = bf.audit()                     # doctest: +SKIP
>>> report.passed, report["fct_daily_sales"].diff.summary.changed    # doctest: +SKIP

For each model the backfill rebuilt, the audit version (the backfill's audit area) is compared
with the published one over exactly the backfilled partitions:

1. In-engine fingerprints per partition (row count and an order-independent digest, one SQL
   aggregate per side); identical partitions are done without moving a row.
2. Only the differing partitions travel, as Arrow streams from DuckDB, into the C++ diff
   (``backfill.diff``) with ``partition_by`` = the model's event_time at its grain and zone.
3. Measure totals over all backfilled periods are summed in the engine, for the gates.

The key rows are matched on: the model's ``unique_key`` when it declares one. Otherwise the
natural key: the smallest set of columns (one, two, then three) that is unique and non-null in
both versions over the backfilled periods (checked in the engine), trying identifier-like
columns (``id``, ``*_id``, ``*_no``, ``*_key``, ``*_number``) first, then the event_time, then
other dates, timestamps and strings, then integers; floating and decimal columns never. A model
without such a key is compared on all its columns (a changed row then shows as removed + added).

A ``merge`` model is compared with what publish will leave: its audit rows plus the published
rows of the periods whose key the new run did not produce (an upsert keeps them); a ``full``
model (or one without event_time) is compared as one whole-table "partition" named ``all``.

Measures (summed per partition and in total) are the numeric columns outside the key that are
not identifier-like. Every audit is recorded in the ledger with the published tables'
fingerprints, so ``publish`` can refuse when they changed since.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import itertools
import json
import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from ._arrow import html_table
from ._tables import RowTable
from .calendar import partitions as calendar_partitions
from .diffing import DiffResult, diff
from .engines import Area
from .engines.duckdb import DuckDBEngine, _in_periods, quote, relation_exists
from .errors import InvalidInputError, NotFoundError
from .gates import GateResult, ModelFacts, evaluate, parse_gates
from .ledger import utcnow
from .project_files import sql_literal

if TYPE_CHECKING:  # pragma: no cover
    from .project import Model, Project
    from .runner import Backfill

log = logging.getLogger(__name__)

__all__ = ["AuditReport", "ModelAudit", "PartitionAudit", "audit_backfill", "backfill_partitions",
           "choose_key"]

Part = tuple[str, dt.datetime, dt.datetime]
_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL")
_INTEGER = _NUMERIC[:10]
_ID_SUFFIXES = ("_id", "_no", "_key", "_number")
WHOLE = "all"  # the one "partition" of an unpartitioned (full) model
_NAIVE = ("TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S", "DATETIME")
_PART = "__backfill_partition"


def is_id_like(name: str) -> bool:
    low = name.lower()
    return low == "id" or low.endswith(_ID_SUFFIXES)


def _base_type(t: str) -> str:
    return t.split("(")[0].strip().upper()


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


# -- computing an audit -------------------------------------------------------------------------
def backfill_partitions(project: Project, bf: Backfill) -> dict[str, list[Part]]:
    """Model -> the partitions the backfill rebuilt, in time order (empty: the whole table)."""
    out: dict[str, list[Part]] = {}
    for t in bf.tasks():
        m = project.models[t.model]
        parts = out.setdefault(t.model, [])
        if t.start is None or t.end is None or m.strategy == "full" or not m.event_time:
            continue
        if m.grain:
            parts.extend((p.label, p.start, p.end)
                         for p in calendar_partitions(m.grain, t.start, t.end, tz=m.tz))
        else:
            parts.append((t.label, t.start, t.end))
    return {k: sorted(set(v), key=lambda p: p[1]) for k, v in out.items()}


def _engine(bf: Backfill) -> DuckDBEngine:
    if not isinstance(bf.engine, DuckDBEngine):
        raise InvalidInputError(f"audit and publish need the DuckDB engine; got {bf.engine!r}")
    return bf.engine


def _columns(cur: duckdb.DuckDBPyConnection, relation: str) -> dict[str, str]:
    desc = cur.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    return {str(r[0]): str(r[1]) for r in desc}


def _candidates(m: Model, types: Mapping[str, str]) -> list[str]:
    ids = [c for c in types if is_id_like(c)]
    et = [m.event_time] if m.event_time and m.event_time in types and \
        m.event_time not in ids else []
    rest = [c for c in types if c not in ids and c not in et]
    temporal_text = [c for c in rest if _base_type(types[c]) not in _NUMERIC
                     and not _base_type(types[c]).endswith("[]")]
    ints = [c for c in rest if _base_type(types[c]) in _INTEGER]
    return ids + et + temporal_text + ints


def choose_key(cur: duckdb.DuckDBPyConnection, m: Model, relations: Sequence[str],
               where: str = "TRUE") -> tuple[list[str], str]:
    """The key to match rows of ``m`` on (see the module doc) and where it came from."""
    if m.unique_key:
        return list(m.unique_key), "unique_key"
    types = _columns(cur, relations[0])
    cands = _candidates(m, types)[:8]
    for size in (1, 2, 3):
        for combo in itertools.combinations(cands, size):
            cols = ", ".join(quote(c) for c in combo)
            nonnull = " AND ".join(f"{quote(c)} IS NOT NULL" for c in combo)
            ok = True
            for rel in relations:
                row = cur.execute(f"SELECT count(*), count(DISTINCT ({cols})), "
                                  f"count(*) FILTER (WHERE {nonnull}) FROM {rel} "
                                  f"WHERE {where}").fetchone()
                assert row is not None
                if not (row[0] == row[1] == row[2]):
                    ok = False
                    break
            if ok:
                return list(combo), "natural"
    return list(types), "all columns"


def _measures(types: Mapping[str, str], key: Sequence[str], m: Model) -> list[str]:
    return [c for c, t in types.items() if _base_type(t) in _NUMERIC and c not in key
            and not is_id_like(c) and c != m.event_time]


@contextlib.contextmanager
def _cursor(cur: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """A second connection to the same database (closed after use)."""
    other = cur.cursor()
    other.execute("SET TimeZone = 'UTC'")  # a setting of each connection, as in the engine
    try:
        yield other
    finally:
        other.close()


def _fp(rows: int, digest: str) -> str:
    return f"{rows}:{digest}"


def fingerprints_sql(cur: duckdb.DuckDBPyConnection, engine: DuckDBEngine, relation: str,
                     event_time: str | None, parts: Sequence[Part]) -> dict[str, str]:
    """label -> "rows:digest" of any relation (a table or a subquery), computed as the engine
    fingerprints partitions (the whole relation under ``"all"`` without partitions)."""
    h = engine._row_hash(cur, relation, "t")
    if not parts or not event_time:
        row = cur.execute(f"SELECT count(*), coalesce(sum({h}::HUGEINT), 0) % {1 << 64} "
                          f"FROM {relation} t").fetchone()
        assert row is not None
        return {WHOLE: _fp(int(row[0]), f"{int(row[1]):016x}")}
    et = quote(event_time)
    values = ", ".join(f"({i}, {sql_literal(s)}, {sql_literal(e)})"
                       for i, (_, s, e) in enumerate(parts))
    rows = cur.execute(
        f"SELECT p.i, count(t.{et}), coalesce(sum({h}::HUGEINT) FILTER "
        f"(WHERE t.{et} IS NOT NULL), 0) % {1 << 64} FROM (VALUES {values}) p(i, s, e) "
        f"LEFT JOIN {relation} t ON t.{et} >= p.s AND t.{et} < p.e GROUP BY p.i").fetchall()
    by_i = {int(i): _fp(int(n), f"{int(d):016x}") for i, n, d in rows}
    return {lab: by_i[i] for i, (lab, _, _) in enumerate(parts)}


def fingerprint_model(engine: DuckDBEngine, project: Project, model: str, area: Area,
                      parts: Sequence[Part]) -> dict[str, str]:
    """label -> "rows:digest" of ``model`` in ``area`` (the whole table under ``"all"``)."""
    if parts:
        return {f.label: _fp(f.rows, f.digest)
                for f in engine.partition_fingerprints(project, model, area, parts)}
    rel = engine.relation(model, area)
    with engine.connect() as cur:
        if not relation_exists(cur, rel):
            return {WHOLE: _fp(0, f"{0:016x}")}
    return {WHOLE: engine.table_fingerprint(rel)}


def _audit_model(engine: DuckDBEngine, project: Project, bf: Backfill, model: str,
                 parts: list[Part]) -> ModelAudit:
    m = project.models[model]
    published_area, audit_area = Area(None), bf.area
    old_fp = fingerprint_model(engine, project, model, published_area, parts)
    # Recorded as is: publish refuses when the audit area changed after the audit.
    area_fp = fingerprint_model(engine, project, model, audit_area, parts)
    pub, new_rel = engine.published(model), engine.relation(model, audit_area)
    labels: list[Part] = parts or [(WHOLE, dt.datetime.min, dt.datetime.max)]
    everywhere = _in_periods(m.event_time, [(s, e) for _, s, e in parts]) \
        if parts and m.event_time else "TRUE"
    diff_result: DiffResult | None = None
    with engine.connect() as cur:
        if not relation_exists(cur, new_rel):
            raise InvalidInputError(f"backfill {bf.id} wrote no table for {model} ({new_rel}); "
                                    "run it first")
        has_old = relation_exists(cur, pub)
        new_fp = area_fp
        if m.strategy == "merge" and m.unique_key and has_old and parts and m.event_time:
            # Compare with what publish will leave: a merge upserts on the key, so published
            # rows of the periods whose key the new run did not produce stay.
            keys = ", ".join(quote(k) for k in m.unique_key)
            new_rel = (f"(SELECT * FROM {new_rel} UNION ALL BY NAME SELECT * FROM {pub} WHERE "
                       f"{everywhere} AND ({keys}) NOT IN (SELECT ({keys}) FROM {new_rel}))")
            new_fp = fingerprints_sql(cur, engine, new_rel, m.event_time, parts)
        differing = [p for p in labels if old_fp[p[0]] != new_fp[p[0]]]
        relations = [new_rel] + ([pub] if has_old else [])
        key, key_source = choose_key(cur, m, relations, everywhere)
        types = _columns(cur, new_rel)
        old_types = _columns(cur, pub) if has_old else {}
        measures = [c for c in _measures(types, key, m) if c in old_types or not has_old]
        totals: dict[str, tuple[float | None, float | None]] = {}
        if measures:
            sums = ", ".join(f"sum({quote(c)})::DOUBLE" for c in measures)
            new_sums = cur.execute(f"SELECT {sums} FROM {new_rel} WHERE {everywhere}").fetchone()
            old_sums = cur.execute(f"SELECT {sums} FROM {pub} WHERE {everywhere}").fetchone() \
                if has_old else None
            for i, c in enumerate(measures):
                totals[c] = (None if old_sums is None else old_sums[i],
                             None if new_sums is None else new_sums[i])
        if differing:
            where = "TRUE" if not parts else _in_periods(
                str(m.event_time), [(s, e) for _, s, e in differing])
            options: dict[str, Any] = {}
            select = "*"
            if parts and m.event_time:
                options = dict(partition_by=m.event_time, grain=m.grain or "day", tz=m.tz)
                if _base_type(types.get(m.event_time, "")) in _NAIVE and m.tz != "UTC":
                    # The engine reads a naive timestamp as UTC (its period filters are UTC);
                    # the diff would read it as wall-clock time in tz. Partition by it as UTC.
                    select = f"*, CAST({quote(m.event_time)} AS TIMESTAMPTZ) AS {quote(_PART)}"
                    options.update(partition_by=_PART, exclude=[_PART])
            # Each side streams from its own cursor: DuckDB streams one result per connection.
            with _cursor(cur) as old_cur, _cursor(cur) as new_cur:
                new_data = new_cur.sql(f"SELECT {select} FROM {new_rel} WHERE {where}")
                old_data = old_cur.sql(f"SELECT {select} FROM {pub} WHERE {where}") if has_old \
                    else old_cur.sql(f"SELECT {select} FROM {new_rel} WHERE FALSE")
                diff_result = diff(old_data, new_data, key=key, measures=measures,
                                   on_duplicate="report", **options)
    by_label: dict[str, dict[str, Any]] = {}
    if diff_result is not None:
        for row in diff_result.partitions.to_pylist():
            if row["partition"] is not None:
                by_label[str(row["partition"])] = row
    results = []
    for label, s, e in labels:
        ro, rn = (int(old_fp[label].split(":")[0]), int(new_fp[label].split(":")[0]))
        same = old_fp[label] == new_fp[label]
        found = by_label.get(label)
        if same or diff_result is None:
            results.append(PartitionAudit(label, s if parts else None, e if parts else None,
                                          ro, rn, True))
            continue
        if found is None:  # unpartitioned model, or rows the diff could not place
            su = diff_result.summary
            meas = {c: (r["sum_old"], r["sum_new"], r["delta"], r["pct_delta"])
                    for r in diff_result.columns.to_pylist() if r["column"] in measures}
            results.append(PartitionAudit(label, s if parts else None, e if parts else None,
                                          ro, rn, False, su.added, su.removed, su.changed, meas))
            continue
        meas = {c: (found[f"{c}_old"], found[f"{c}_new"], found[f"{c}_delta"],
                    found[f"{c}_pct_delta"]) for c in measures}
        results.append(PartitionAudit(label, s, e, ro, rn, False, int(found["added"]),
                                      int(found["removed"]), int(found["changed"]), meas))
    return ModelAudit(model=model, key=key, key_source=key_source, measures=measures,
                      partitions=results, diff=diff_result, totals=totals, gates=[],
                      published_fingerprints=old_fp, audit_fingerprints=area_fp,
                      columns=sorted(set(types) | set(old_types)))


def _facts(a: ModelAudit) -> ModelFacts:
    added, removed, changed = a._counts()
    schema: list[str] = []
    if a.diff is not None:
        for row in a.diff.schema.to_pylist():
            types = " -> ".join(t for t in (row["old_type"], row["new_type"]) if t)
            schema.append(f"{row['column']} {row['change']} ({types})")
    return ModelFacts(totals=a.totals, added=added, removed=removed, changed=changed,
                      changed_per_partition={p.label: p.changed for p in a.partitions},
                      column_changes=a.changed_columns, schema_changes=schema, columns=a.columns)


def audit_backfill(bf: Backfill, gates: Mapping[str, Any] | None = None) -> AuditReport:
    """Audits every model of ``bf`` (see the module doc), evaluates the gates of
    ``backfill.yml`` plus ``gates``, records the audit in the ledger and returns the report."""
    project = bf.project
    rec = bf.ledger.backfill(bf.id)
    if bf.mode != "audit":
        raise InvalidInputError(f"backfill {bf.id} wrote the published tables directly "
                                "(--direct); there is no audit area to audit")
    if rec["status"] in ("published", "discarded"):
        raise InvalidInputError(f"backfill {bf.id} is {rec['status']}; nothing to audit")
    status = bf.status()
    if status.done != status.total:
        raise InvalidInputError(f"backfill {bf.id} has {status.total - status.done} of "
                                f"{status.total} task(s) not done ({status.status}); run or "
                                f"resume it first: backfill run --resume {bf.id}")
    engine = _engine(bf)
    parts = backfill_partitions(project, bf)
    order = [m for m in project.topological_order() if m in parts]
    settings = project.settings
    file_gates = parse_gates(settings.audits if settings else None, order, "backfill.yml audits",
                             strict=False)
    call_gates = parse_gates(gates, order, "gates")
    audits = []
    try:
        for model in order:
            a = _audit_model(engine, project, bf, model, parts[model])
            facts = _facts(a)
            a.gates = [evaluate(g, facts) for g in file_gates[model] + call_gates[model]]
            log.info("audit %s: %s", bf.id, a.summary_line())
            audits.append(a)
    finally:
        engine.close()  # let other processes (readers, runners) open the file
    report = AuditReport(bf.id, uuid.uuid4().hex[:12], utcnow(), audits)
    _record(bf, report)
    return report


def _record(bf: Backfill, report: AuditReport) -> None:
    from .runner import _who

    with bf.ledger._tx() as db:
        for a in report.models.values():
            result = {"audit_id": report.audit_id, **a.to_dict()}
            db.execute("INSERT INTO audits (backfill_id, model, created_at, created_by, passed, "
                       "published_fingerprints, result) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (bf.id, a.model, report.created_at, _who(), int(a.passed),
                        json.dumps(a.published_fingerprints), json.dumps(result, default=str)))


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()
