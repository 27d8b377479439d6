"""Helpers shared by the command modules: output, the spinner, common options, opening a project
or a recorded backfill from the parsed arguments."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from ..api import Backfill, Project
from ..plan import Plan
from ..run import LedgerBackend, open_ledger
from ..windows import parse_duration

__all__ = [
    "add_ledger_option",
    "add_period_options",
    "add_project_options",
    "busy",
    "dump",
    "ledger_from_args",
    "open_backfill",
    "open_project",
    "plan_from_args",
    "write",
]


def write(text: str) -> None:
    """Writes ``text`` to stdout as whole lines (exactly one trailing newline)."""
    sys.stdout.write(text.rstrip("\n") + "\n")


def dump(value: Any) -> None:
    """Writes ``value`` as indented JSON (``--json`` output); dates and the like as strings."""
    write(json.dumps(value, indent=2, default=str))


def busy(text: str) -> contextlib.AbstractContextManager[Any]:
    """A spinner on stderr while work runs (only on a terminal)."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    # rich is imported here, not at the top: it is only needed on a terminal and costs start-up.
    from rich.console import Console

    return Console(stderr=True).status(text)


def add_project_options(p: argparse.ArgumentParser) -> None:
    """``--project DIR`` and ``--json``, taken by every command that works on a project."""
    p.add_argument("--project", default=".", help="project directory (default: current)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_ledger_option(p: argparse.ArgumentParser) -> None:
    """``--ledger URL``, taken by every command that opens a recorded backfill."""
    p.add_argument(
        "--ledger",
        metavar="URL",
        help="the ledger: postgresql://user@host:port/db (shared by workers on many "
        "hosts) or sqlite:///path (default: backfill.yml's state)",
    )


def ledger_from_args(args: argparse.Namespace) -> LedgerBackend | None:
    """The ledger ``--ledger`` names; None for the project's own."""
    url = getattr(args, "ledger", None)
    return open_ledger(url) if url else None


def add_period_options(p: argparse.ArgumentParser) -> None:
    """The selection and period options of a command that plans (``estimate``)."""
    p.add_argument("--select", required=True, help='dbt selector, e.g. "fct_daily_sales+"')
    p.add_argument("--exclude", help="dbt selector of models to leave out")
    p.add_argument("--start", required=True, help="period start (ISO date or date-time)")
    p.add_argument("--end", required=True, help="period end, exclusive")
    p.add_argument("--tz", help="time zone of naive --start/--end (default UTC)")
    p.add_argument("--as-of", help="only partitions ended by then (default: now)")
    add_batching(p)
    p.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="tasks at once (default 4)"
    )


def partitions_per_run(text: str) -> int | str:
    """``--partitions-per-run``: ``auto`` or a positive integer."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 'auto' or a positive integer")
    return value


def add_batching(p: argparse.ArgumentParser) -> None:
    """``--partitions-per-run`` and ``--min-task`` (automatic batching)."""
    p.add_argument(
        "--partitions-per-run",
        type=partitions_per_run,
        default="auto",
        metavar="N|auto",
        help="partitions per task; auto (default): from measured "
        "costs, each task at least --min-task of work",
    )
    p.add_argument(
        "--min-task",
        type=lambda t: parse_duration(t, "--min-task"),
        default=None,
        metavar="DURATION",
        help="auto batching: the least measured work per task "
        "(default: backfill.yml batching.min_task, else 2s)",
    )


def open_project(args: argparse.Namespace) -> Project:
    """The project of ``--project`` (or ``--dbt``, which :mod:`.dbt` turns into ``--project``)."""
    return Project.load(args.project)


def plan_from_args(args: argparse.Namespace) -> tuple[Project, Plan]:
    """The project and the plan of the selection and period options."""
    project = open_project(args)
    plan = project.plan(
        args.select,
        args.start,
        args.end,
        exclude=args.exclude,
        tz=args.tz,
        as_of=args.as_of,
        partitions_per_run=args.partitions_per_run,
        concurrency=args.concurrency,
        min_task_seconds=args.min_task,
    )
    return project, plan


def open_backfill(args: argparse.Namespace) -> Backfill:
    """The recorded backfill ``args.id`` of the project (default: the latest)."""
    return Backfill.open(args.id, project=Path(args.project), ledger=ledger_from_args(args))
