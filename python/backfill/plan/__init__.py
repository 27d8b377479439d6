"""The plan stage's results: ``Plan`` (tasks, dependencies, schedule, findings) and estimates."""

from __future__ import annotations

from .plan import Estimate, ModelSummary, Plan, PlanFinding, format_seconds

__all__ = ["Estimate", "ModelSummary", "Plan", "PlanFinding", "format_seconds"]
