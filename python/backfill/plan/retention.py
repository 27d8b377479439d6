"""The retention check of a plan: whether the landing sources (Kafka topics) still retain the
records of the periods the plan replays into their landing models.

>>> checks = check_retention(project, models, as_of=as_of)    # doctest: +SKIP
>>> plan.replay[0]        # per partition: log start, oldest retained time, from/to, records

Each source checks itself (:meth:`~backfill.model.landing.LandingSource.check_retention`); this
module only picks the periods, over the planned tasks of each landing model. The planner runs
it before it makes the :class:`~.plan.Plan`, which keeps the checks (:class:`RetentionCheck`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..model.landing import landing_models

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from .plan import ModelSummary, PlanFinding

__all__ = ["RetentionCheck", "check_retention"]


class RetentionCheck(Protocol):
    """A replayed source's retention check over a planned period, as a plan keeps it: its text
    (``describe``), its contents (``to_dict``: per partition from/to offsets and record
    counts) and its findings (RETENTION, ...), which join the plan's. A source kind's own
    check (the Kafka integration's ``SourceCheck``) satisfies it without importing the plan
    stage's insides."""

    @property
    def findings(self) -> Sequence[PlanFinding]: ...

    def to_dict(self) -> dict[str, Any]: ...

    def __str__(self) -> str: ...


def check_retention(
    project: Project, models: Sequence[ModelSummary], *, as_of: dt.datetime
) -> tuple[RetentionCheck, ...]:
    """The retention checks of the landing models among the planned ``models`` that have
    tasks, each over the period its tasks cover, at ``as_of`` (none when no landing model is
    rebuilt)."""
    landing = landing_models(project)
    checks: list[RetentionCheck] = []
    for m in models:
        if m.model not in landing or not m.tasks or not m.periods:
            continue
        start = min(p[0] for p in m.periods)
        end = max(p[1] for p in m.periods)
        checks.append(landing[m.model].check_retention(m.model, start, end, now=as_of))
    return tuple(checks)
