"""``--dbt PATH`` on the commands that take a project: plan, run, status, estimate, audit,
publish, discard, changelog.

    backfill plan --dbt examples/dbt_shop --select "fct_daily_sales+" --start 2026-08-01 \
        --end 2026-10-29 --propagate clip
    backfill run --dbt . --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \
        --reason "discount bug fixed"
    backfill audit --dbt . && backfill publish --dbt . --note "revenue from 1 Aug ~2% lower"

``--dbt PATH`` is ``--project PATH`` for a dbt project directory (a directory holding
dbt_project.yml and no backfill.yml is recognised by ``--project`` too).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from .exit_codes import EXIT_USAGE

__all__ = ["COMMANDS", "add_dbt_options"]

COMMANDS = (
    "plan",
    "run",
    "status",
    "estimate",
    "audit",
    "publish",
    "discard",
    "changelog",
    "forward",
)


def _with_dbt(func: Any, args: argparse.Namespace) -> int:
    dbt = getattr(args, "dbt", None)
    if dbt is not None:
        if not (Path(dbt) / "dbt_project.yml").is_file() and Path(dbt).suffix != ".json":
            sys.stderr.write(
                f"backfill {args.command}: error: --dbt {dbt}: not a dbt project "
                "directory (no dbt_project.yml)\n"
            )
            return EXIT_USAGE
        args.project = dbt
    elif getattr(args, "project", None) is None:
        sys.stderr.write(f"backfill {args.command}: error: give --project or --dbt\n")
        return EXIT_USAGE
    return int(func(args))


def add_dbt_options(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``--dbt PATH`` to the project commands registered in ``sub``."""
    for name in COMMANDS:
        parser = sub.choices.get(name)
        if parser is None:
            continue
        parser.add_argument(
            "--dbt",
            metavar="PATH",
            help="a dbt project directory (imported with Project.from_dbt; runs "
            "through dbt into an audit schema)",
        )
        for action in parser._actions:
            if action.dest == "project":
                action.required = False  # --dbt may stand in for it
                if action.default is None:
                    action.help = (action.help or "") + " (or --dbt)"
        parser.set_defaults(func=functools.partial(_with_dbt, parser.get_default("func")))
