"""``backfill estimate`` and ``backfill check``: run models into scratch schemas before a backfill.

    backfill estimate --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \\
        --concurrency 10
    backfill check MODEL --partition 2026-08-03

``estimate`` times one sample partition per model and schedules the plan with those costs;
``check`` runs one partition of a model twice and compares (with the lint). Both take
``--project DIR`` and ``--json``. Exit 1 when the plan has an error finding (``estimate``) or the
two runs differ (``check``).
"""

from __future__ import annotations

import argparse

from ..audit import check_run_twice
from ..run.estimate import estimate
from .common import (
    add_period_options,
    add_project_options,
    busy,
    dump,
    open_project,
    plan_from_args,
    write,
)
from .exit_codes import EXIT_FAILED, EXIT_OK
from .helptext import add_command

__all__ = ["add_check_parser", "add_estimate_parser"]


def add_estimate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "estimate",
        "time one sample partition per model; estimate the plan",
        description="Estimate how long a backfill takes, from one timed sample partition per "
        "model.",
        examples="""\
The samples run into scratch schemas (nothing published changes); the plan is then
scheduled with the measured times at --concurrency. Exit 1 when the plan has an error.

example:
  backfill estimate --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \\
      --concurrency 10""",
    )
    add_project_options(p)
    add_period_options(p)
    p.set_defaults(func=cmd_estimate)


def add_check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "check",
        "run a model's partition twice and compare; lint it",
        description="Run one partition of a model twice into scratch schemas and compare "
        "(and lint the model).",
        examples="""\
Two runs that differ mean the model is not reproducible (it reads the clock, or is
nondeterministic): exit 1.

example:
  backfill check fct_daily_sales --partition 2026-08-03""",
    )
    p.add_argument("model", help="the model to check")
    add_project_options(p)
    p.add_argument("--partition", required=True, help="a date (or date-time) in the partition")
    p.set_defaults(func=cmd_check)


def cmd_estimate(args: argparse.Namespace) -> int:
    project, plan = plan_from_args(args)
    if plan.errors():  # a stale-leaving plan (not ok) still runs, so it can be estimated
        write(plan.describe())
        return EXIT_FAILED
    with busy("running one sample partition per model into scratch..."):
        report = estimate(project, plan, concurrency=args.concurrency)
    dump(report.to_dict()) if args.json else write(str(report))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    with busy(f"running {args.model} {args.partition} twice..."):
        report = check_run_twice(open_project(args), args.model, args.partition)
    dump(report.to_dict()) if args.json else write(str(report))
    return EXIT_OK if report.ok else EXIT_FAILED
