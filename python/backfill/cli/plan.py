"""``backfill plan``: plan a backfill of a project and print it (text, JSON or mermaid).

``--project`` is a project directory (``backfill.yml``, or a dbt project), or a Python file that
builds a :class:`backfill.Project`: a module-level ``project`` or a ``build_project()`` function.
Exit 0 when the plan is ok, 1 when it has an error finding or leaves published partitions stale
(STALE_DOWNSTREAM), 2 for usage or input errors.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ..api import Project
from ..errors import InvalidInputError, NotFoundError
from .common import add_batching
from .exit_codes import EXIT_FAILED, EXIT_OK
from .helptext import add_command

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "plan",
        "plan a backfill: tasks, dependencies, cost and findings",
        description="Plan rebuilding the selected models for [START, END) (END exclusive); "
        "nothing runs.",
        examples="""\
The plan shows per model the partitions to rebuild, the tasks and their order, the estimated
time, and findings (what would go wrong or stay stale). Exit 0 when it is ok, 1 when it has an
error or leaves published partitions stale, 2 for usage or input errors.

examples:
  backfill plan --project . --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29
      ("fct_daily_sales+": the model and everything downstream of it, as dbt selects)
  backfill plan --project . --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \\
      --mermaid > plan.mmd
  backfill plan --dbt . --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \\
      --propagate clip""",
    )
    p.add_argument(
        "--project",
        required=True,
        metavar="DIR|FILE.py",
        help="a project directory (backfill.yml + models/), or a Python file "
        "defining `project` or `build_project()`",
    )
    p.add_argument("--select", required=True, help="dbt-style selector, e.g. 'fct_daily_sales+'")
    p.add_argument("--exclude", default=None, help="selector of models to leave out")
    p.add_argument("--start", required=True, help="ISO date or date-time (naive: in --tz)")
    p.add_argument("--end", required=True, help="exclusive end, same forms as --start")
    p.add_argument("--as-of", default=None, help="only partitions ended by then (default now)")
    p.add_argument("--tz", default=None, help="zone of naive --start/--end/--as-of (default UTC)")
    p.add_argument(
        "--propagate",
        default="impact",
        choices=("impact", "clip"),
        help="impact (default): selected downstream models also rebuild the periods "
        "the change reaches through them; clip: only [START, END), reporting "
        "what stays stale",
    )
    p.add_argument(
        "--include-in-progress",
        action="store_true",
        default=None,
        help="also rebuild the partitions still in progress at --as-of (this month, "
        "this year), which the regular runs have published; default for dbt",
    )
    add_batching(p)
    p.add_argument(
        "--concurrency",
        type=int,
        default=4,
        metavar="N",
        help="tasks at once the schedule assumes (default 4)",
    )
    p.add_argument("--allow-append", action="store_true", help="accept append models")
    p.add_argument(
        "--cost",
        action="append",
        default=[],
        metavar="MODEL=SECONDS",
        help="seconds per partition of a model (repeatable)",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the plan as JSON")
    out.add_argument("--mermaid", action="store_true", help="a mermaid flowchart")
    p.set_defaults(func=run)


def load_project(path: str) -> Project:
    file = Path(path)
    if file.is_dir() or file.suffix in (".yml", ".yaml"):  # a project directory (backfill.yml)
        return Project.load(file)
    if not file.is_file():
        raise NotFoundError(f"project file {path!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"_backfill_project_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise InvalidInputError(f"project file {path!r} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    project = getattr(module, "project", None)
    if project is None and callable(getattr(module, "build_project", None)):
        project = module.build_project()
    if not isinstance(project, Project):
        raise InvalidInputError(
            f"project file {path!r} defines no backfill.Project: expected a module-level "
            "`project` or a `build_project()` function returning one"
        )
    return project


def _costs(items: list[str]) -> dict[str, float]:
    costs = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            costs[name] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise InvalidInputError(f"--cost {item!r}: expected MODEL=SECONDS, e.g. fct=240")
    return costs


def run(args: argparse.Namespace) -> int:
    project = load_project(args.project)
    plan = project.plan(
        args.select,
        args.start,
        args.end,
        exclude=args.exclude,
        as_of=args.as_of,
        tz=args.tz,
        propagate=args.propagate,
        partitions_per_run=args.partitions_per_run,
        concurrency=args.concurrency,
        allow_append=args.allow_append,
        costs=_costs(args.cost),
        include_in_progress=args.include_in_progress,
        min_task_seconds=args.min_task,
    )
    if args.json:
        sys.stdout.write(plan.to_json() + "\n")
    elif args.mermaid:
        sys.stdout.write(plan.to_mermaid())
    else:
        sys.stdout.write(plan.describe() + "\n")
    return EXIT_OK if plan.ok else EXIT_FAILED
