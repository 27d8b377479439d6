"""Replaying from Kafka: the retention check of a planned period, the landing tasks' reads and
consumer group offset resets. Sits between ``run`` (which runs landing tasks) and ``engines``;
talks to the broker through confluent-kafka (the ``kafka`` extra).

>>> plan = project.plan("source:kafka.orders+", "2026-11-01", "2026-11-08")   # doctest: +SKIP
>>> plan.replay[0]        # per partition: log start, oldest retained time, from/to, records
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.kafka import KafkaSettings

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from ..plan.plan import Plan

__all__ = ["check_plan", "landing_models"]


def landing_models(project: Project) -> dict[str, KafkaSettings]:
    """The project's landing models (model -> its Kafka source's settings)."""
    return {
        name: m.meta["landing"]
        for name, m in project.models.items()
        if isinstance(m.meta.get("landing"), KafkaSettings)
    }


def check_plan(project: Project, plan: Plan) -> None:
    """Runs the retention check of every landing model the plan rebuilds, over the period its
    tasks cover, and attaches the checks and their findings to ``plan``."""
    from .retention import check_source

    landing = landing_models(project)
    checks, findings = [], []
    for m in plan.models:
        if m.model not in landing or not m.tasks or not m.periods:
            continue
        start = min(p[0] for p in m.periods)
        end = max(p[1] for p in m.periods)
        check = check_source(landing[m.model], m.model, start, end, now=plan.as_of)
        checks.append(check)
        findings.extend(check.findings)
    if checks:
        plan.attach_replay(checks, findings)
