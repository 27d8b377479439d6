"""The plan stage: the planner (``plan_project``, ``PlanOptions``) and its results, ``Plan``
(tasks, dependencies, schedule, findings) and estimates."""

from __future__ import annotations

from .costs import ModelCost
from .plan import Estimate, ModelSummary, Plan, PlanFinding, format_seconds
from .planner import PlanOptions, plan_project

__all__ = [
    "Estimate",
    "ModelCost",
    "ModelSummary",
    "Plan",
    "PlanFinding",
    "PlanOptions",
    "format_seconds",
    "plan_project",
]
