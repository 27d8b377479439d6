"""The plan stage's results: ``Plan`` (tasks, dependencies, schedule, findings) and estimates."""

from __future__ import annotations

from .costs import ModelCost
from .plan import Estimate, ModelSummary, Plan, PlanFinding, format_seconds

__all__ = ["Estimate", "ModelCost", "ModelSummary", "Plan", "PlanFinding", "format_seconds"]
