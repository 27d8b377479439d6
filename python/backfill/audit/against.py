"""The audit of a backfill against a table elsewhere: what the backfill wrote (its audit area,
not yet published) compared with another system's table, such as the old warehouse of a
migration, through :func:`backfill.diff_tables`.

>>> report = bf.audit(against={"fct_daily_sales":                              # doctest: +SKIP
...     "postgresql://me@old-db/shop#public.fct_daily_sales"})
>>> report["fct_daily_sales"].diff.changed_sample.to_pandas()                   # doctest: +SKIP

For each model named, the other table is the old side and the audit area the new one, both read
over the backfill's periods of that model only (each engine's own period filter), cut into the
model's partitions (its event_time at its grain and time zone; one segment for a model without
event_time or a ``full`` one) and fingerprinted in each engine; only the partitions that differ
are read. Rows match on ``key``, else the model's ``unique_key``, else the column the audit
tries first (:func:`.keys.first_candidate`), which must then be unique on both sides. The
measures are the audit's (:func:`.keys.measures_of`) that both tables have.

The result is an :class:`~.report.AuditReport` whose models say what they were compared with
(the location, password masked). Only the gates given in the call are checked (those of
``backfill.yml`` bound the change against the published version). It is not recorded in the
ledger: publishing still needs the audit against the published version (``backfill audit``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._numbers import Number, delta, to_kind
from .._secrets import mask_url
from .._stamps import utcnow
from ..engines import WHOLE, Part
from ..errors import InvalidInputError, NotFoundError
from ..fingerprints import PartitionFingerprint
from .audit import _facts, check_auditable
from .crossdiff import NULL_SEGMENT, TablesDiffResult, diff_tables
from .gates import evaluate, parse_gates
from .keys import first_candidate, measures_of
from .report import AuditReport, MeasureValues, ModelAudit, PartitionAudit

if TYPE_CHECKING:  # pragma: no cover
    from ..run import Backfill

__all__ = ["audit_against", "tables_against"]

log = logging.getLogger(__name__)


def tables_against(bf: Backfill, against: str | Mapping[str, str]) -> dict[str, str]:
    """model -> location of the table to compare it with: ``against`` as a mapping, or one
    location for a backfill that rebuilt one model. InvalidInputError (or NotFoundError for a
    model the project lacks) naming what is wrong."""
    rebuilt = [m for m in bf.project.topological_order() if m in bf.partitions()]
    if isinstance(against, str):
        if len(rebuilt) != 1:
            raise InvalidInputError(
                f"against={mask_url(against)!r} names one table, but backfill {bf.id} rebuilt "
                f"{len(rebuilt)} models ({', '.join(rebuilt)}): say which model it is compared "
                "with ({model: location}; on the command line --select MODEL or MODEL=LOCATION)"
            )
        return {rebuilt[0]: against}
    if not against:
        raise InvalidInputError("against= names no table: expected {model: location}")
    for model, location in against.items():
        if model not in bf.project.models:
            raise NotFoundError(
                f"no model {model!r} in project {bf.project.name!r} (against "
                f"{mask_url(location)!r})"
            )
        if model not in rebuilt:
            raise InvalidInputError(
                f"backfill {bf.id} did not rebuild {model} (it rebuilt {', '.join(rebuilt)}): "
                "nothing of it to compare"
            )
        if not isinstance(location, str):
            raise InvalidInputError(
                f"against {model}: {location!r}: expected a location (duckdb:///FILE#schema."
                "table, postgresql://...#schema.table, a Parquet file or folder)"
            )
    return dict(against)


def audit_against(
    bf: Backfill,
    against: str | Mapping[str, str],
    gates: Mapping[str, Any] | None = None,
    key: Sequence[str] | None = None,
) -> AuditReport:
    """Compares each model's audit area of ``bf`` with the table ``against`` names for it (see
    the module doc); ``key`` (for one model) overrides the model's key."""
    check_auditable(bf)
    tables = tables_against(bf, against)
    if key is not None and len(tables) != 1:
        raise InvalidInputError(
            f"key={list(key)!r} applies to one model; {len(tables)} are compared "
            f"({', '.join(tables)}): leave it out to use each model's own key"
        )
    call_gates = parse_gates(gates, list(tables), "gates")
    parts = bf.partitions()
    audits = []
    for model, location in tables.items():
        a = _audit_model(bf, model, location, parts[model], key)
        a.gates = [evaluate(g, _facts(a)) for g in call_gates[model]]
        log.info("audit %s against %s: %s", bf.id, a.against, a.summary_line())
        audits.append(a)
    return AuditReport(bf.id, uuid.uuid4().hex[:12], utcnow(), audits, recorded=False)


def _audit_model(
    bf: Backfill, model: str, location: str, parts: list[Part], key: Sequence[str] | None
) -> ModelAudit:
    project, engine = bf.project, bf.engine
    m = project.models[model]
    cols = engine.columns(project, model, bf.area)
    if cols is None:
        raise InvalidInputError(f"backfill {bf.id} wrote no table for {model}; run it first")
    partitioned = bool(parts and m.event_time and m.strategy not in ("full", "view"))
    if key is not None:
        keys, source = list(key), "given"
    elif m.unique_key:
        keys, source = list(m.unique_key), "unique_key"
    else:
        guess = first_candidate(m, cols)
        if guess is None:
            raise InvalidInputError(
                f"{model} has no unique_key and no column to match rows on: pass key= (--key)"
            )
        keys, source = [guess], "natural"
    # A DuckDB file takes one writer process, and one configuration within a process: the
    # engine lets go of it before the diff opens it read-only (it reopens when next used).
    engine.close()
    mine = engine.area_table(project, model, bf.area)
    options: dict[str, Any] = {}
    if partitioned:
        options = {
            "partition_by": m.event_time,
            "grain": m.grain or "day",
            "tz": m.tz,
            "periods": [(s, e) for _, s, e in parts],
        }
    try:
        result = diff_tables(location, mine, keys, **options)
    except InvalidInputError as exc:
        if source != "natural" or "not unique" not in str(exc):
            raise
        raise InvalidInputError(f"{exc}; {model} has no unique_key: pass key= (--key)") from None
    measures = [c for c in measures_of(cols, keys, m) if c in result.measures]
    labels: list[tuple[str, Any, Any]] = list(parts) if partitioned else [(WHOLE, None, None)]
    return _model_audit(model, mask_url(location), keys, source, measures, labels, result, cols)


def _model_audit(
    model: str,
    against: str,
    key: list[str],
    key_source: str,
    measures: list[str],
    labels: list[tuple[str, Any, Any]],
    result: TablesDiffResult,
    cols: Sequence[Any],
) -> ModelAudit:
    """The :class:`ModelAudit` of ``result`` (the other table old, the audit area new) over the
    backfill's partitions ``labels`` (label, start, end) of the model."""
    columns = {r["column"]: r for r in result.columns.to_pylist()}
    kinds = {c: str(columns[c]["sum_kind"]) for c in measures}
    totals: dict[str, tuple[Number | None, Number | None]] = {
        c: result.measure_totals[c] for c in measures
    }
    empty = PartitionFingerprint.empty()
    by_label = {
        (str(r["partition"]) if r["partition"] is not None else NULL_SEGMENT): r
        for r in result.partitions.to_pylist()
    }
    segment = {"all": WHOLE}
    fps = {segment.get(lb, lb): pair for lb, pair in result.segments.items()}
    partitions = []
    for label, start, end in labels:
        fa, fb = fps.get(label, (None, None))
        fa, fb = fa or empty, fb or empty
        if fa == fb:
            partitions.append(PartitionAudit(label, start, end, fa.rows, fb.rows, True))
            continue
        row = by_label.get(label)
        if row is None:  # one segment: the whole result
            s = result.summary
            meas: dict[str, MeasureValues] = {
                c: (*totals[c], delta(*totals[c]), columns[c]["pct_delta"]) for c in measures
            }
            counts = (s.added, s.removed, s.changed)
        else:
            meas = {
                c: (
                    to_kind(row[f"{c}_old"], kinds[c]),
                    to_kind(row[f"{c}_new"], kinds[c]),
                    to_kind(row[f"{c}_delta"], kinds[c]),
                    row[f"{c}_delta_pct"],
                )
                for c in measures
            }
            counts = (int(row["added"]), int(row["removed"]), int(row["changed"]))
        partitions.append(PartitionAudit(label, start, end, fa.rows, fb.rows, False, *counts, meas))
    return ModelAudit(
        model=model,
        key=key,
        key_source=key_source,
        measures=measures,
        measure_kinds=kinds,
        partitions=partitions,
        diff=result if not result.identical else None,
        totals=totals,
        gates=[],
        published_fingerprints={lb: fps.get(lb, (None, None))[0] or empty for lb, _, _ in labels},
        audit_fingerprints={lb: fps.get(lb, (None, None))[1] or empty for lb, _, _ in labels},
        columns=sorted({c.name for c in cols} | set(columns)),
        timings={
            # the segments' and the key ranges' fingerprint scans (both sides at once)
            "fingerprint scan": result.timings.get("fingerprints", 0.0)
            + result.timings.get("bisection", 0.0),
            "transfer": result.timings.get("transfer", 0.0),
            "diff": result.timings.get("diff", 0.0),
        },
        against=against,
    )
