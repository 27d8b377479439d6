"""Costs learnt from the ledger: what each model's tasks took in the project's recent backfills
(every attempt's duration is recorded) and in ``backfill estimate``'s sample runs.

>>> costs = model_costs(project, ["fct_daily_sales"])        # doctest: +SKIP
>>> str(costs["fct_daily_sales"])                            # 'measured: 89 runs, median 21 ms'
>>> project.plan("fct_daily_sales+", "2026-08-01", "2026-10-29", costs=costs)   # doctest: +SKIP

A measurement is stale when the backfill that made it recorded another hash of the model's SQL
than the model has now; stale ones are used only when there is nothing newer, and say so.

Times count only from the engine type the project runs on (a Spark backfill's times do not
estimate DuckDB); the rows each partition held come from every engine's runs: per partition
where the engine counted them in the write, else a task's rows spread over its partitions.

On an embedded engine (DuckDB) a task's time is its machine time (:mod:`.machine_time`): tasks
run side by side in one process share its cores, and the wall time of a task that ran beside
another says more about the other than about itself.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..calendar import partitions as calendar_partitions
from ..engines import type_capabilities
from ..errors import BackfillError
from ..plan.costs import Measurement, ModelCost, fit_cost, overhead_hint
from .backfill import sql_hash
from .ledger import CostMeasure, LedgerBackend, ledger_for
from .machine_time import machine_times

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["model_costs"]

#: How many of the project's most recent backfills the history reads.
HISTORY_BACKFILLS = 20


def model_costs(
    project: Project,
    models: Sequence[str],
    *,
    ledger: LedgerBackend | None = None,
    backfills: int = HISTORY_BACKFILLS,
    engine: str | None = None,
) -> dict[str, ModelCost]:
    """Per model of ``models``: its cost fitted from the ledger's measurements (``"measured"``
    from backfill runs, else ``"sample"`` from ``backfill estimate``), or ``source="none"``,
    for a run on ``engine`` (an engine type; default: the project's ``engine.type``).
    A project without a ledger yet has no history (nothing is created)."""
    if engine is None and project.settings is not None:
        engine = project.settings.engine.type
    names = [m for m in models if m in project.models]
    if ledger is None:
        try:
            ledger = ledger_for(project, must_exist=True)
        except BackfillError as exc:  # no state directory, or no ledger yet
            log.debug("no cost history for %s: %s", project.name, exc)
            return {m: ModelCost(m, "none") for m in models}
    current = {m: sql_hash(project.models[m].sql) for m in names}
    found: dict[str, list[Measurement]] = {}
    caps = None if engine is None else type_capabilities(engine)
    shared = engine if caps is not None and caps.embedded else None
    # On an embedded engine every model's attempts are read: those of models not asked about
    # shared the machine too. Elsewhere only the models asked about.
    rows = ledger.cost_history(project.name, list(project.models) if shared else names, backfills)
    shares = {} if shared is None else _machine_shares(rows, shared)
    for i, row in enumerate(rows):
        if row.model not in current:
            continue
        seconds = row.wall_seconds if row.wall_seconds is not None else row.seconds
        seconds = shares.get(i, seconds)
        if seconds is None:
            continue
        was = row.sql_hash
        found.setdefault(row.model, []).append(
            Measurement(
                row.partitions,
                float(seconds),
                row.rows,
                row.source,
                stale=was is not None and was != current[row.model],
                engine=row.engine_type,
                partition_rows=_partition_rows(project, row),
            )
        )
    # Models measured at one task size only borrow the fixed cost per task that models measured
    # at several sizes show (it is mostly the engine's and the runner's, not the model's).
    first = {m: fit_cost(m, ms, engine=engine) for m, ms in found.items()}
    hint = overhead_hint(list(first.values()))
    out = {
        m: fit_cost(m, found[m], hint, engine=engine) if m in found else ModelCost(m, "none")
        for m in models
    }
    log.info("costs of %s: %s", project.name, "; ".join(f"{m}: {c}" for m, c in out.items()))
    return out


def _machine_shares(rows: Sequence[CostMeasure], engine: str) -> dict[int, float]:
    """Index in ``rows`` -> the machine time of each backfill attempt on the embedded engine
    type ``engine`` (:mod:`.machine_time`: tasks run side by side in this process share its
    cores), from the attempts' stamps. Other engines' attempts are not this machine's (and
    their times are not used for ``engine``); samples ran alone; attempts without stamps have
    nothing to share: all keep their wall times."""
    spans: list[tuple[float, float]] = []
    index: list[int] = []
    for i, row in enumerate(rows):
        if row.source != "run" or row.engine_type != engine or row.wall_seconds is None:
            continue
        if not row.finished_at:
            continue
        try:
            end = dt.datetime.fromisoformat(row.finished_at).timestamp()
        except ValueError:
            continue
        spans.append((end - row.wall_seconds, end))
        index.append(i)
    return dict(zip(index, machine_times(spans), strict=True))


def _partition_rows(project: Project, row: CostMeasure) -> dict[str, float] | None:
    """label -> rows of each partition ``row`` wrote: as the engine counted them, else the
    task's rows (one partition: its label; several: spread evenly over the model's calendar
    partitions of the period, which is all a task's total says); None when unknown."""
    if row.partition_rows:
        return {label: float(n) for label, n in row.partition_rows.items()}
    if row.rows is None or row.label is None:
        return None
    if row.partitions == 1:
        return {row.label: float(row.rows)}
    model = project.models[row.model]
    if not model.grain or row.start is None or row.end is None:
        return None
    try:
        parts = calendar_partitions(
            model.grain,
            dt.datetime.fromisoformat(row.start),
            dt.datetime.fromisoformat(row.end),
            tz=model.tz,
            align="expand",
        )
    except (ValueError, BackfillError):  # a grain changed since: the period is not its own
        return None
    return {p.label: row.rows / len(parts) for p in parts} if parts else None
