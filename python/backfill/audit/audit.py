"""Audit: what a backfill changes, model by model and partition by partition, before publishing.

>>> report = bf.audit()                     # doctest: +SKIP
>>> report.passed, report["fct_daily_sales"].diff.summary.changed    # doctest: +SKIP

For each model the backfill rebuilt, the audit version (the backfill's audit area) is compared
with the published one over exactly the backfilled partitions, through the engine interface
only (no SQL here):

1. Fingerprints per partition (row count and an order-independent digest): the published
   version's in the engine; the audit area's as the run's tasks recorded them when they wrote
   it (an engine that computes them: DuckDB replace tasks), else in the engine. Identical
   partitions are done without moving a row.
2. Only the differing partitions travel, as Arrow streams from the engine, into the C++ diff
   (``backfill.diff``) with ``partition_by`` = the model's event_time at its grain and zone.
3. Measure totals over all backfilled periods are summed in the engine, for the gates.

Rows are matched on the key :mod:`.keys` chooses. A ``merge`` model is compared with what publish
will leave (the engine's ``preview``); a ``full`` model (or one without event_time) is compared
as one whole-table "partition" named ``all``. Every audit is recorded in the ledger with the
published tables' fingerprints, so ``publish`` can refuse when they changed since.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime as dt
import logging
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from decimal import Context, Decimal, InvalidOperation, localcontext
from typing import TYPE_CHECKING, Any

from .._numbers import is_exact, sum_kind, to_kind
from .._stamps import utcnow, who
from ..engines import (
    PUBLISHED,
    WHOLE,
    Column,
    ColumnKind,
    Engine,
    Part,
)
from ..errors import InvalidInputError
from ..fingerprints import PartitionFingerprint
from ..run.ledger import TaskRow
from .diff import DiffResult, DiffStream, diff
from .gates import ModelFacts, evaluate, parse_gates
from .keys import Version, choose_key, first_candidate, measures_of
from .report import AuditReport, MeasureValues, ModelAudit, PartitionAudit

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from ..run import Backfill

log = logging.getLogger(__name__)

#: Models audited side by side. Their engine calls are mostly waiting (round trips, a Spark job's
#: scheduling), so two overlap well; more would hold more differing partitions' rows in memory
#: at once for little gain.
AUDIT_THREADS = 2

__all__ = ["audit_backfill", "audit_model", "check_auditable"]

#: ModelAudit.timings, in this order
_PHASES = ("fingerprint scan", "key", "measure sums", "transfer", "diff")
# Room for any sum of DECIMAL(38, s) values (Python's default context keeps 28 digits).
_EXACT = Context(prec=80)
# The diff partitions naive timestamps by this extra UTC column (see audit_model).
_PART = "__backfill_partition"


def audit_model(
    engine: Engine,
    project: Project,
    backfill_id: str,
    area: Any,
    model: str,
    parts: list[Part],
    run_fps: Mapping[str, PartitionFingerprint] | None = None,
    run_versions: Collection[str] = (),
) -> ModelAudit:
    """Audits one model of a backfill whose audit area is ``area`` over ``parts``.
    ``run_fps``: label -> the area's fingerprint per partition as the run's tasks recorded
    them; used instead of scanning the area when they cover exactly ``parts``.
    ``run_versions``: the versions of the area the tasks' writes made (see
    ``Engine.written_by``).

    Both versions are read as the engine pins them when it starts (``Engine.pinned``), and
    the audit records the versions whose fingerprints it holds: the published one, and the
    area's when it fingerprinted the area itself or the run's writes are provably all the area
    holds. Publish then re-reads only a side whose version moved since."""
    with engine.pinned(project, model, [PUBLISHED, area]) as (old_version, area_version):
        a = _audit_model(engine, project, backfill_id, area, model, parts, run_fps)
    from_run = _covers(parts, run_fps)
    if old_version is not None:
        a.versions["published"] = old_version
    if area_version is not None and (
        not from_run or engine.written_by(project, model, area, area_version, run_versions)
    ):
        a.versions["area"] = area_version
    return a


def _covers(parts: list[Part], run_fps: Mapping[str, PartitionFingerprint] | None) -> bool:
    """Whether the run's fingerprints are of exactly ``parts``."""
    return bool(parts) and run_fps is not None and set(run_fps) == {p[0] for p in parts}


def _audit_model(
    engine: Engine,
    project: Project,
    backfill_id: str,
    area: Any,
    model: str,
    parts: list[Part],
    run_fps: Mapping[str, PartitionFingerprint] | None,
) -> ModelAudit:
    m = project.models[model]
    clock = _Clock()
    old_v, new_v = Version(PUBLISHED), Version(area, preview=True)
    periods = [(s, e) for _, s, e in parts] if parts and m.event_time else None
    new_cols = engine.columns(project, model, area)
    if new_cols is None:
        raise InvalidInputError(f"backfill {backfill_id} wrote no table for {model}; run it first")
    old_cols = engine.columns(project, model, PUBLISHED)
    has_old = old_cols is not None
    old_names = {c.name for c in old_cols or []}
    labels: list[Part] = parts or [(WHOLE, dt.datetime.min, dt.datetime.max)]
    versions = [new_v] + ([old_v] if has_old else [])
    # Everything below up to the diff, announced up front: an engine where each question costs
    # a job (Spark) answers them in one pass over both versions. No key to check in it: the diff
    # checks the first candidate itself (below).
    likely = [c for c in measures_of(new_cols, [], m) if c in old_names or not has_old]
    # Recorded as is: publish refuses when the audit area changed after the audit. The run's
    # own fingerprints of what its tasks wrote (the same definition, in the tasks'
    # transactions) save a scan of every backfilled partition: the area is the backfill's own,
    # and should it have changed since, publish's re-check of the area against these (one
    # scan) refuses.
    from_run = _covers(parts, run_fps)
    # Then the area's measure totals follow too, from the published ones and the diff of the
    # differing partitions (the others hold the same rows): the audit reads the area only in
    # the partitions that differ (see _area_totals).
    derive = from_run and has_old and m.strategy != "merge" and periods is not None
    scope_areas = [PUBLISHED] if derive else [PUBLISHED, area] if has_old else [area]
    # The scope stays open for the diff: an engine that read both versions' rows up front (few
    # rows, every query a job: Spark) serves the diff's streams from them.
    scope = engine.audit_scope(
        project, model, scope_areas, parts, likely, [], diff_area=area if has_old else None
    )
    with scope:
        old_fp = engine.fingerprints(project, model, PUBLISHED, parts)
        area_fp = (
            dict(run_fps)
            if from_run and run_fps is not None
            else engine.fingerprints(project, model, area, parts)
        )
        new_fp = (
            engine.fingerprints(project, model, area, parts, preview=True)
            if m.strategy == "merge"
            else area_fp
        )
        clock.lap("fingerprint scan")
        differing = [p for p in labels if old_fp[p[0]] != new_fp[p[0]]]
        diff_periods = (
            [(s, e) for _, s, e in differing] if periods is not None and differing else periods
        )
        # The key only matches the rows of the differing partitions (identical ones are never
        # diffed), so it must be unique there. Its first candidate is tried by the diff itself:
        # no duplicate and no null key on either side is exactly choose_key's test over those
        # rows, and saves its distinct counts (two over the differing partitions; over all 90
        # days they were ~20 s of a 100M-row table's audit). Otherwise choose_key checks in the
        # engine and the diff runs again. With nothing differing, the key is informational.
        guess = first_candidate(m, new_cols) if differing else None
        key, key_source = (
            ([guess], "natural")
            if guess
            else choose_key(engine, project, model, versions, new_cols, diff_periods)
        )
        clock.lap("key")
        measures = [c for c in measures_of(new_cols, key, m) if c in old_names or not has_old]
        sums_of = None if derive else area
        kinds, totals = _totals(
            engine, project, model, sums_of, measures, periods, new_cols, old_cols
        )
        clock.lap("measure sums")
        diff_result: DiffResult | None = None
        if differing:
            differ = _DifferingDiff(
                engine,
                project,
                model,
                area,
                parts,
                differing,
                new_cols,
                has_old,
                clock,
                _rows(old_fp, new_fp),
            )
            diff_result = differ.run(key, measures)
            su = diff_result.summary
            if guess and (su.duplicate_keys or su.null_keys_old or su.null_keys_new):
                key, key_source = choose_key(
                    engine, project, model, versions, new_cols, diff_periods
                )
                clock.lap("key")
                if key != [guess]:
                    measures = [
                        c for c in measures_of(new_cols, key, m) if c in old_names or not has_old
                    ]
                    kinds, totals = _totals(
                        engine, project, model, sums_of, measures, periods, new_cols, old_cols
                    )
                    clock.lap("measure sums")
                    diff_result = differ.run(key, measures)
        if derive:
            totals = _area_totals(engine, project, model, area, periods, kinds, totals, diff_result)
            clock.lap("measure sums")
    results = _partitions(labels, bool(parts), old_fp, new_fp, diff_result, kinds)
    return ModelAudit(
        model=model,
        key=key,
        key_source=key_source,
        measures=measures,
        measure_kinds=kinds,
        partitions=results,
        diff=diff_result,
        totals=totals,
        gates=[],
        published_fingerprints=dict(old_fp),
        audit_fingerprints=area_fp,
        columns=sorted({c.name for c in new_cols} | old_names),
        timings={k: clock.laps.get(k, 0.0) for k in _PHASES},
    )


def _rows(old_fp: Mapping[str, Any], new_fp: Mapping[str, Any]) -> dict[str, int]:
    """Per partition label, the larger side's row count (what a pair of it holds in memory)."""
    return {label: max(old_fp[label].rows, fp.rows) for label, fp in new_fp.items()}


@dataclasses.dataclass
class _DifferingDiff:
    """The C++ diff of a model's published and audit versions over its ``differing`` partitions:
    streamed a group of partitions at a time (memory follows the largest group, not all the
    differing partitions), or at once when unpartitioned or when a key is duplicated. One per
    audited model; :meth:`run` runs again with another key when the first guess was rejected."""

    engine: Engine
    project: Project
    model: str
    area: Any
    parts: list[Part]
    differing: list[Part]
    new_cols: list[Column]
    has_old: bool
    clock: _Clock
    part_rows: Mapping[str, int] | None = None

    def run(self, key: list[str], measures: list[str]) -> DiffResult:
        m = self.project.models[self.model]
        partitioned = bool(self.parts and m.event_time)
        where = [(s, e) for _, s, e in self.differing] if partitioned else None
        options, utc = self._partitioning() if partitioned else ({}, None)
        self.clock.lap(
            "key"
        )  # what ran since the last lap (a rejected guess's choose_key) is the key's
        result = None
        # Without a published version every row is added: carried to the end, nothing to gain.
        if (
            where is not None
            and self.part_rows is not None
            and len(self.differing) > 1
            and self.has_old
        ):
            result = self._streamed(key, measures, options, utc)
        if result is None:
            result = self._whole(key, measures, options, utc, where)
        # The C++ phases run on imported buffers; the rest of the call is the transfer (the engine
        # producing the Arrow batches and their import).
        inside = sum(result.timings.values())
        laps = self.clock.laps
        took = self.clock.lap("diff")
        laps["transfer"] = laps.get("transfer", 0.0) + max(took - inside, 0.0)
        laps["diff"] = laps.get("diff", 0.0) - took + inside
        return result

    def _partitioning(self) -> tuple[dict[str, Any], str | None]:
        """The diff's partition options, and the extra UTC column to partition by (or None)."""
        m = self.project.models[self.model]
        assert m.event_time is not None
        options: dict[str, Any] = {
            "partition_by": m.event_time,
            "grain": m.grain or "day",
            "tz": m.tz,
        }
        et_kind = next((c.kind for c in self.new_cols if c.name == m.event_time), None)
        if et_kind == ColumnKind.TIMESTAMP and m.tz != "UTC":
            # The engine reads a naive timestamp as UTC (its period filters are UTC);
            # the diff would read it as wall-clock time in tz. Partition by it as UTC.
            options.update(partition_by=_PART, exclude=[_PART])
            return options, _PART
        return options, None

    def _groups(self) -> list[list[Part]]:
        """The differing partitions in order, gathered up to :data:`_PAIR_ROWS` rows a group."""
        assert self.part_rows is not None
        groups: list[list[Part]] = []
        size = 0
        for p in self.differing:
            rows = self.part_rows.get(p[0], 0)
            if not groups or size + rows > _PAIR_ROWS:
                groups.append([])
                size = 0
            groups[-1].append(p)
            size += rows
        return groups

    def _streamed(
        self, key: list[str], measures: list[str], options: Mapping[str, Any], utc: str | None
    ) -> DiffResult | None:
        """The diff fed one group of partitions at a time (each released before the next is
        fetched); None when a duplicated key needs the whole diff (see DiffStream) or when the
        partitions fit in one group."""
        groups = self._groups()
        if len(groups) < 2:
            return None  # one pair: the whole diff is the same, without carrying unmatched rows
        engine, project, model = self.engine, self.project, self.model
        stream = DiffStream(key, measures=measures, on_duplicate="report", **options)
        for group in groups:
            periods = [(s, e) for _, s, e in group]
            with engine.stream_pair(project, model, self.area, periods, utc_column=utc) as (
                old_data,
                new_data,
            ):
                stream.add(old_data, new_data)
            if stream.whole_needed:
                log.info(
                    "audit of %s: a duplicated key; diffing the differing partitions at once", model
                )
                return None
        result = stream.finish()
        if result is None:
            log.info("audit of %s: a key recurs across partitions; diffing them at once", model)
        else:
            log.debug(
                "audit of %s: %d pairs streamed, %d/%d rows carried",
                model,
                stream.pairs,
                *stream.carried,
            )
        return result

    def _whole(
        self,
        key: list[str],
        measures: list[str],
        options: Mapping[str, Any],
        utc: str | None,
        where: Any,
    ) -> DiffResult:
        """The diff of every differing partition as one Arrow stream per side (without a
        published version, the audit area's empty preview stands in for it)."""
        engine, project, model = self.engine, self.project, self.model
        if self.has_old and where is not None:
            pair = engine.stream_pair(project, model, self.area, where, utc_column=utc)
        else:
            old_version, old_where = (
                (Version(PUBLISHED), where)
                if self.has_old
                else (Version(self.area, preview=True), [])
            )
            pair = _two_streams(
                engine.stream(
                    project,
                    model,
                    old_version.area,
                    old_where,
                    preview=old_version.preview,
                    utc_column=utc,
                ),
                engine.stream(project, model, self.area, where, preview=True, utc_column=utc),
            )
        with pair as (old_data, new_data):
            return diff(
                old_data, new_data, key=key, measures=measures, on_duplicate="report", **options
            )


@contextlib.contextmanager
def _two_streams(
    old: contextlib.AbstractContextManager[Any], new: contextlib.AbstractContextManager[Any]
) -> Iterator[tuple[Any, Any]]:
    with old as old_data, new as new_data:
        yield old_data, new_data


#: Rows (of the larger side) a streamed pair gathers partitions up to; a larger partition is a
#: pair alone. Fewer engine queries for small partitions (a Spark job each), bounded memory.
_PAIR_ROWS = 2_000_000


def _totals(
    engine: Engine,
    project: Project,
    model: str,
    area: Any | None,
    measures: list[str],
    periods: list[tuple[dt.datetime, dt.datetime]] | None,
    new_cols: list[Column],
    old_cols: list[Column] | None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """Each measure's sum kind and (published, audit area) totals over ``periods``; ``area``
    None: the area's are left None (for :func:`_area_totals`)."""
    kinds = {
        c: sum_kind(col.kind.value for col in [*new_cols, *(old_cols or [])] if col.name == c)
        for c in measures
    }
    new_sums = (
        dict.fromkeys(measures)
        if area is None
        else engine.measure_sums(project, model, area, measures, periods, preview=True)
    )
    old_sums = (
        engine.measure_sums(project, model, PUBLISHED, measures, periods)
        if old_cols is not None
        else dict.fromkeys(measures)
    )
    return kinds, {
        c: (to_kind(old_sums[c], kinds[c]), to_kind(new_sums[c], kinds[c])) for c in measures
    }


def _area_totals(
    engine: Engine,
    project: Project,
    model: str,
    area: Any,
    periods: list[tuple[dt.datetime, dt.datetime]] | None,
    kinds: Mapping[str, str],
    totals: Mapping[str, Any],
    diff_result: DiffResult | None,
) -> dict[str, Any]:
    """The area's measure totals without reading the area where the diff tells them: the
    published total, less the differing partitions' old sums, plus their new sums (the other
    partitions hold the same rows: equal fingerprints). Summed in the measure's own kind (exact
    for integers and decimals). The area is read for the measures the diff cannot tell: a
    float (its sums would round differently from one sum over the rows), one whose new total
    may be NULL rather than 0 (the diff sums NULLs as 0), and every measure when the diff left
    rows out (duplicated or NULL keys)."""
    out = dict(totals)
    su = diff_result.summary if diff_result is not None else None
    left_out = su is not None and bool(su.duplicate_keys or su.null_keys_old or su.null_keys_new)
    rows = diff_result.partitions.to_pylist() if diff_result is not None else []
    unsure: list[str] = []
    for c, (old, _) in totals.items():
        kind = kinds[c]
        if left_out or not is_exact(kind):
            unsure.append(c)
            continue
        with localcontext(_EXACT):  # integers and decimals as Decimals: exact sums
            was = sum((_exact(r[f"{c}_old"]) for r in rows), Decimal(0))
            now = sum((_exact(r[f"{c}_new"]) for r in rows), Decimal(0))
            rest = _exact(old) - was
            total = _at_scale_of(rest + now, old)
        if now == 0 and (old is None or rest == 0):
            unsure.append(c)  # no non-NULL value may be left: NULL or 0, only the rows say
            continue
        out[c] = (old, to_kind(total, kind))
    if unsure:
        sums = engine.measure_sums(project, model, area, unsure, periods, preview=True)
        out.update({c: (totals[c][0], to_kind(sums[c], kinds[c])) for c in unsure})
    return out


def _at_scale_of(total: Decimal, like: Any) -> Decimal:
    """``total`` without the trailing zeros that a wider scale of the diff's rows gave it (an
    unconstrained PostgreSQL numeric arrives as DECIMAL(38, 10)), down to the scale of the
    engine's own sum ``like``: the total the engine would give when the area's values have the
    published ones' scale. Never rounds: a total with more digits keeps them."""
    if not isinstance(like, Decimal) or not like.is_finite() or not total.is_finite():
        return total
    with localcontext(_EXACT):
        try:
            at = total.quantize(Decimal(1).scaleb(int(like.as_tuple().exponent)))
        except InvalidOperation:
            return total
    return at if at == total else total


def _exact(value: Any) -> Decimal:
    """An exact sum (an int or a Decimal; None: nothing to add) as a Decimal."""
    return Decimal(0) if value is None else Decimal(value)


class _Clock:
    """Wall seconds of an audit's phases, in order (see ModelAudit.timings)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> float:
        """Adds (and returns) the seconds since the previous lap to ``name``."""
        now = time.perf_counter()
        took = now - self._last
        self.laps[name] = self.laps.get(name, 0.0) + took
        self._last = now
        return took


def _partitions(
    labels: list[Part],
    partitioned: bool,
    old_fp: Mapping[str, Any],
    new_fp: Mapping[str, Any],
    diff_result: DiffResult | None,
    kinds: Mapping[str, str],
) -> list[PartitionAudit]:
    by_label: dict[str, dict[str, Any]] = {}
    if diff_result is not None:
        for row in diff_result.partitions.to_pylist():
            if row["partition"] is not None:
                by_label[str(row["partition"])] = row

    def values(old: Any, new: Any, delta: Any, pct: Any, kind: str) -> MeasureValues:
        return (to_kind(old, kind), to_kind(new, kind), to_kind(delta, kind), pct)

    results = []
    for label, s, e in labels:
        ro, rn = old_fp[label].rows, new_fp[label].rows
        start, end = (s, e) if partitioned else (None, None)
        found = by_label.get(label)
        if old_fp[label] == new_fp[label] or diff_result is None:
            results.append(PartitionAudit(label, start, end, ro, rn, True))
        elif found is None:  # unpartitioned model, or rows the diff could not place
            su = diff_result.summary
            meas = {
                r["column"]: values(
                    r["sum_old"], r["sum_new"], r["delta"], r["pct_delta"], kinds[r["column"]]
                )
                for r in diff_result.columns.to_pylist()
                if r["column"] in kinds
            }
            results.append(
                PartitionAudit(
                    label, start, end, ro, rn, False, su.added, su.removed, su.changed, meas
                )
            )
        else:
            meas = {
                c: values(
                    found[f"{c}_old"],
                    found[f"{c}_new"],
                    found[f"{c}_delta"],
                    found[f"{c}_delta_pct"],
                    k,
                )
                for c, k in kinds.items()
            }
            results.append(
                PartitionAudit(
                    label,
                    s,
                    e,
                    ro,
                    rn,
                    False,
                    int(found["added"]),
                    int(found["removed"]),
                    int(found["changed"]),
                    meas,
                )
            )
    return results


def _run_versions(tasks: list[TaskRow]) -> dict[str, set[str]]:
    """Model -> the versions of the area its tasks' writes made (those that recorded one)."""
    out: dict[str, set[str]] = {}
    for t in tasks:
        if t.fingerprint is not None and t.fingerprint.version is not None:
            out.setdefault(t.model, set()).add(t.fingerprint.version)
    return out


def _run_fingerprints(tasks: list[TaskRow]) -> dict[str, dict[str, PartitionFingerprint]]:
    """Model -> label -> fingerprint of each partition as the tasks recorded it when they wrote
    it, for the models whose every task recorded its partitions' (see
    ``WriteResult.task_fingerprint``)."""
    out: dict[str, dict[str, PartitionFingerprint]] = {}
    without: set[str] = set()
    for t in tasks:
        fps = t.partition_fingerprints
        mine = out.setdefault(t.model, {})
        if fps is None or set(fps) & set(mine):
            without.add(t.model)
        else:
            mine.update(fps)
    return {m: fps for m, fps in out.items() if m not in without}


def _facts(a: ModelAudit) -> ModelFacts:
    added, removed, changed = a._counts()
    schema: list[str] = []
    if a.diff is not None:
        for row in a.diff.schema.to_pylist():
            types = " -> ".join(t for t in (row["old_type"], row["new_type"]) if t)
            schema.append(f"{row['column']} {row['change']} ({types})")
    return ModelFacts(
        totals=a.totals,
        added=added,
        removed=removed,
        changed=changed,
        changed_per_partition={p.label: p.changed for p in a.partitions},
        column_changes=a.changed_columns,
        schema_changes=schema,
        columns=a.columns,
    )


def check_auditable(bf: Backfill) -> None:
    """InvalidInputError unless ``bf`` wrote an audit area that is complete and not yet
    published or discarded."""
    rec = bf.ledger.backfill(bf.id)
    if bf.mode != "audit":
        raise InvalidInputError(
            f"backfill {bf.id} wrote the published tables directly "
            "(--direct); there is no audit area to audit"
        )
    if rec.status.final:
        raise InvalidInputError(f"backfill {bf.id} is {rec.status}; nothing to audit")
    status = bf.status()
    if status.done != status.total:
        raise InvalidInputError(
            f"backfill {bf.id} has {status.total - status.done} of "
            f"{status.total} task(s) not done ({status.status}); run or "
            f"resume it first: backfill run --resume {bf.id}"
        )


def audit_backfill(bf: Backfill, gates: Mapping[str, Any] | None = None) -> AuditReport:
    """Audits every model of ``bf`` (see the module doc), evaluates the gates of
    ``backfill.yml`` plus ``gates``, records the audit in the ledger and returns the report."""
    project = bf.project
    check_auditable(bf)
    parts = bf.partitions()
    order = [m for m in project.topological_order() if m in parts]
    settings = project.settings
    file_gates = parse_gates(
        settings.audits if settings else None, order, "backfill.yml audits", strict=False
    )
    call_gates = parse_gates(gates, order, "gates")
    tasks = bf.ledger.tasks(bf.id)
    run_fps, run_versions = _run_fingerprints(tasks), _run_versions(tasks)

    def one(model: str) -> ModelAudit:
        a = audit_model(
            bf.engine,
            project,
            bf.id,
            bf.area,
            model,
            parts[model],
            run_fps.get(model),
            run_versions.get(model, ()),
        )
        a.gates = [evaluate(g, _facts(a)) for g in file_gates[model] + call_gates[model]]
        log.info("audit %s: %s", bf.id, a.summary_line())
        log.info("audit %s: %s took %s", bf.id, model, a.timings_line())
        return a

    # Models side by side: each audits its own area against its own published table, and its
    # engine calls are a few round trips or small jobs (a Spark job a model: 0.3-0.5 s of
    # scheduling each for a one-row-a-day table), which overlap. The report keeps the order; a
    # model that fails stops the models not yet started (the running one finishes first).
    # The models with the most partitions start first (longest first: on Spark a model's
    # audit takes about the time to read its partitions' files, and in topological order the
    # shop's monthly rollup took a thread beside one daily model while the other daily model
    # waited for it, so two daily models ran one after the other).
    pool = concurrent.futures.ThreadPoolExecutor(
        max(1, min(AUDIT_THREADS, len(order))), thread_name_prefix="audit"
    )
    try:
        started = {
            m: pool.submit(one, m) for m in sorted(order, key=lambda m: len(parts[m]), reverse=True)
        }
        audits = [started[m].result() for m in order]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bf.engine.close()  # let other processes (readers, runners) open the file
    report = AuditReport(bf.id, uuid.uuid4().hex[:12], utcnow(), audits)
    bf.ledger.record_audit(
        bf.id,
        report.audit_id,
        report.created_at,
        who(),
        [
            {
                "model": a.model,
                "passed": a.passed,
                "published_fingerprints": a.published_fingerprints,
                "result": a.to_dict(),
            }
            for a in report.models.values()
        ],
    )
    return report
