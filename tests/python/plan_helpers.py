"""Shared helpers for the planner tests: the shop project and the reference planner bridge."""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
from pathlib import Path
from typing import Any

import backfill

ROOT = Path(__file__).resolve().parents[2]
UTC = dt.timezone.utc

sys.path.insert(0, str(ROOT / "benchmarks"))
from plan_reference import plan_reference  # noqa: E402


def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shop() -> backfill.Project:
    project: backfill.Project = load_module(
        ROOT / "examples/shop/project.py", "shop_project"
    ).build_project()
    return project


def reference_models(p: backfill.Project) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, node in p.nodes.items():  # declaration order, as the C++ tie-break uses
        if isinstance(node, backfill.Source):
            out[name] = {"grain": node.grain, "begin": None, "depends_on": [], "source": True}
        else:
            out[name] = {
                "grain": node.grain,
                "begin": node.begin,
                "depends_on": [(d.parent, d.mapping, d.start, d.end) for d in node.depends_on],
                "source": False,
            }
    return out


def core_tasks(plan: backfill.Plan) -> tuple[list[tuple[Any, ...]], list[list[int]]]:
    tasks, deps = [], []
    for i in range(plan.task_count):
        t = plan.task(i)
        tasks.append((t["model"], t["start"], t["end"], t["partitions"]))
        deps.append(list(t["depends_on"]))
    return tasks, deps


def reference_tasks(
    p: backfill.Project,
    select: str,
    start: dt.datetime,
    end: dt.datetime,
    as_of: dt.datetime,
    **kwargs: Any,
) -> tuple[list[tuple[Any, ...]], list[list[int]]]:
    return plan_reference(reference_models(p), p.select(select), start, end, as_of, **kwargs)
