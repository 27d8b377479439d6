"""The plan stage: the planner (``plan_project``, ``PlanOptions``) and its results, ``Plan``
(tasks, dependencies, schedule, findings; made once, with its ``PlanContext``: costs, batching,
the sources' ``RetentionCheck``s) and estimates."""

from __future__ import annotations

from .costs import ModelCost
from .plan import Estimate, ModelSummary, Plan, PlanContext, PlanFinding, format_seconds
from .planner import PlanOptions, plan_project
from .retention import RetentionCheck

__all__ = [
    "Estimate",
    "ModelCost",
    "ModelSummary",
    "Plan",
    "PlanContext",
    "PlanFinding",
    "PlanOptions",
    "RetentionCheck",
    "format_seconds",
    "plan_project",
]
