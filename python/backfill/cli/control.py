"""``backfill pause``, ``backfill resume`` and ``backfill cancel``: hold, release or stop a
backfill from any process (the ledger carries it to every runner and Airflow task).

    backfill pause ID          running tasks finish, nothing new starts; runners wait
    backfill resume ID         lift the pause: waiting runners carry on by themselves
    backfill cancel ID --reason "wrong period"   nothing more runs; the audit area stays
                                                 until backfill discard ID

Exit codes: 0 done, 2 a bad id or a move the backfill's state does not allow (nothing changed).
Only the ledger is touched (not the warehouse), so these run beside busy runners.
"""

from __future__ import annotations

import argparse
import sys

from ..api import Project
from ..errors import BackfillError
from ..run import ledger_for
from ..run.control import cancel_backfill, pause_backfill, unpause_backfill
from .common import add_ledger_option, ledger_from_args
from .exit_codes import EXIT_OK, EXIT_USAGE
from .helptext import add_command

__all__ = ["add_parsers"]


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, text, example in (
        (
            "pause",
            "pause a backfill: running tasks finish, nothing new starts",
            "backfill pause ID               runners wait until: backfill resume ID",
        ),
        (
            "resume",
            "lift a backfill's pause",
            "backfill resume ID              waiting runners carry on by themselves",
        ),
        (
            "cancel",
            "cancel a backfill: nothing more runs (audit area kept)",
            'backfill cancel ID --reason "wrong period"    then: backfill discard ID',
        ),
    ):
        p = add_command(
            sub,
            name,
            text,
            examples=f"""example:
  {example}

Only the ledger changes (not the warehouse), so this works from any process or host while
runners are busy; exit 2 when the backfill's state does not allow it (nothing changes).""",
        )
        p.add_argument("id", help="backfill id")
        p.add_argument("--project", default=".", help="project directory (default: current)")
        if name == "cancel":
            p.add_argument("--reason", required=True, help="why (recorded with the backfill)")
        add_ledger_option(p)
        p.set_defaults(func=cmd_control, action=name)


def cmd_control(args: argparse.Namespace) -> int:
    try:
        ledger = ledger_from_args(args) or ledger_for(Project.load(args.project), must_exist=True)
        if args.action == "cancel":
            cancel_backfill(ledger, args.id, args.reason)
            after = "nothing more runs; its audit area stays until: backfill discard " + args.id
        else:
            (pause_backfill if args.action == "pause" else unpause_backfill)(ledger, args.id)
            after = (
                "running tasks finish, nothing new starts; runners wait for: backfill "
                f"resume {args.id}"
                if args.action == "pause"
                else "waiting runners carry on; if none is running: backfill run --resume "
                + args.id
            )
    except BackfillError as exc:
        sys.stderr.write(f"backfill {args.action}: error: {exc}\n")
        return EXIT_USAGE
    past = {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[args.action]
    sys.stdout.write(f"backfill {args.id} {past}: {after}\n")
    return EXIT_OK
