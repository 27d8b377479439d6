"""The retention check of a plan: whether the landing sources (Kafka topics) still retain the
records of the periods the plan replays into their landing models.

>>> check_retention(project, plan)      # doctest: +SKIP
>>> plan.replay[0]        # per partition: log start, oldest retained time, from/to, records

Each source checks itself (:meth:`~backfill.model.landing.LandingSource.check_retention`); this
module only picks the periods, over the plan's tasks of each landing model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model.landing import landing_models

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from .plan import Plan, PlanFinding

__all__ = ["check_retention"]


def check_retention(project: Project, plan: Plan) -> None:
    """Runs the retention check of every landing model the plan rebuilds, over the period its
    tasks cover, and attaches the checks and their findings to ``plan`` (nothing when the plan
    rebuilds none)."""
    landing = landing_models(project)
    checks: list[Any] = []
    findings: list[PlanFinding] = []
    for m in plan.models:
        if m.model not in landing or not m.tasks or not m.periods:
            continue
        start = min(p[0] for p in m.periods)
        end = max(p[1] for p in m.periods)
        check = landing[m.model].check_retention(m.model, start, end, now=plan.as_of)
        checks.append(check)
        findings.extend(check.findings)
    if checks:
        plan.attach_replay(checks, findings)
