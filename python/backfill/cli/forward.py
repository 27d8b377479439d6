"""``backfill forward``: record a forward-only change (no backfill of history), beside the
estimated cost of the backfill it avoids.

    backfill forward MODEL --from 2026-12-01 --note "new column meaningful from today; earlier
        periods unchanged" [--reason "..."] [--dry-run] [--no-estimate] [--concurrency N]

It first plans ``MODEL+`` from the model's begin up to ``--from`` and estimates it from one
sample partition per model (``--no-estimate``: the plan only), prints that, then records the
decision in the changelog and tells OpenLineage and the model's consumers. ``--dry-run`` prints
the estimate and records nothing. Exit 0 when recorded (or dry run); 2 for input errors (nothing
recorded).
"""

from __future__ import annotations

import argparse

from ..errors import InvalidInputError
from ..run.estimate import format_seconds_fine
from .common import add_project_options, busy, dump, open_project, write
from .exit_codes import EXIT_OK
from .helptext import add_command

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "forward",
        "record a forward-only change (history not rebuilt)",
        description="Record that MODEL changes from --from on without a backfill of its history.",
        examples='''\
It first plans and estimates the backfill this avoids (MODEL and everything downstream,
from the model's begin up to --from) and prints it; then records the decision in the
changelog and tells the model's consumers. --dry-run prints the estimate and records nothing.

example:
  backfill forward fct_daily_sales --from 2026-12-01 --dry-run \\
      --note "new column meaningful from today; earlier periods unchanged"''',
    )
    p.add_argument("model", help="the changed model")
    p.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="DATE",
        help="first period the change applies to (ISO date; naive: the model's zone)",
    )
    p.add_argument("--note", required=True, help="why history is not rebuilt (for consumers)")
    p.add_argument("--reason", help="the change (default: 'forward-only change from DATE')")
    p.add_argument("--dry-run", action="store_true", help="print the estimate, record nothing")
    p.add_argument(
        "--no-estimate", action="store_true", help="plan the avoided backfill without sampling it"
    )
    p.add_argument("--concurrency", type=int, default=4, metavar="N")
    add_project_options(p)
    p.set_defaults(func=cmd_forward)


def cmd_forward(args: argparse.Namespace) -> int:
    project = open_project(args)
    if not args.note.strip():  # before the estimate: it takes a while
        raise InvalidInputError(f"--note {args.note!r}: say why history is not rebuilt")
    with busy("estimating the backfill a forward-only change avoids..."):
        plan, est, why = project.avoided_backfill(
            args.model,
            args.start,
            concurrency=args.concurrency,
            sample=not args.no_estimate,
        )
    cost = (
        (
            f"≈ {format_seconds_fine(est.makespan)} at {est.concurrency} concurrent "
            f"({format_seconds_fine(est.estimate.total_work)} of work)"
        )
        if est
        else f"not estimated ({why})"
    )
    summary = {
        "model": args.model,
        "from": args.start,
        "avoided_backfill": {
            "select": f"{args.model}+",
            "tasks": len(plan),
            "estimate": est.to_dict() if est else None,
            "not_estimated": why if est is None else None,
        },
    }
    if not args.json:
        write(
            f"the backfill this avoids: {args.model}+ up to {args.start}, {len(plan)} task(s), "
            f"{cost}"
        )
        if est is not None:
            write("  " + str(est).replace("\n", "\n  "))
    if args.dry_run:
        dump({**summary, "recorded": False}) if args.json else write("dry run: nothing recorded")
        return EXIT_OK
    change = project.forward(args.model, args.start, note=args.note, reason=args.reason)
    dump({**summary, "recorded": True, **change.to_dict()}) if args.json else write(str(change))
    return EXIT_OK
