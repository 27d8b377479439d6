"""Costs learnt from the ledger: what each model's tasks took in the project's recent backfills
(every attempt's duration is recorded) and in ``backfill estimate``'s sample runs.

>>> costs = model_costs(project, ["fct_daily_sales"])        # doctest: +SKIP
>>> str(costs["fct_daily_sales"])                            # 'measured: 89 runs, median 21 ms'
>>> project.plan("fct_daily_sales+", "2026-08-01", "2026-10-29", costs=costs)   # doctest: +SKIP

A measurement is stale when the backfill that made it recorded another hash of the model's SQL
than the model has now; stale ones are used only when there is nothing newer, and say so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import BackfillError
from ..plan.costs import Measurement, ModelCost, fit_cost, overhead_hint
from .backfill import sql_hash
from .ledger import LedgerBackend, ledger_for

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
) -> dict[str, ModelCost]:
    """Per model of ``models``: its cost fitted from the ledger's measurements (``"measured"``
    from backfill runs, else ``"sample"`` from ``backfill estimate``), or ``source="none"``.
    A project without a ledger yet has no history (nothing is created)."""
    names = [m for m in models if m in project.models]
    if ledger is None:
        try:
            ledger = ledger_for(project, must_exist=True)
        except BackfillError as exc:  # no state directory, or no ledger yet
            log.debug("no cost history for %s: %s", project.name, exc)
            return {m: ModelCost(m, "none") for m in models}
    current = {m: sql_hash(project.models[m].sql) for m in names}
    found: dict[str, list[Measurement]] = {}
    for row in ledger.cost_history(project.name, names, backfills):
        seconds = row.wall_seconds if row.wall_seconds is not None else row.seconds
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
            )
        )
    # Models measured at one task size only borrow the fixed cost per task that models measured
    # at several sizes show (it is mostly the engine's and the runner's, not the model's).
    first = {m: fit_cost(m, ms) for m, ms in found.items()}
    hint = overhead_hint(list(first.values()))
    out = {m: fit_cost(m, found[m], hint) if m in found else ModelCost(m, "none") for m in models}
    log.info("costs of %s: %s", project.name, "; ".join(f"{m}: {c}" for m, c in out.items()))
    return out
