"""The ``backfill`` command line. Configuration (logging, output format) lives here only.

Exit codes: 0 ok, 1 the work failed (a failed task, a failed gate), 2 usage or input error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from . import audit as audit_cli
from .. import calendar
from . import lint as lint_cli
from . import plan as plan_cli
from . import run as run_cli
from ..errors import BackfillError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _format_length(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    if hours >= 48 and rest == 0 and hours % 24 == 0:
        return f"{hours // 24}d"
    return f"{hours}h" if minutes == 0 else f"{hours}h{minutes:02d}m"


def _cmd_partitions(args: argparse.Namespace) -> int:
    parts = calendar.partitions(args.grain, args.start, args.end, tz=args.tz, align=args.align)
    if args.json:
        rows = [
            {
                "label": p.label,
                "start": p.start.isoformat(),
                "end": p.end.isoformat(),
                "seconds": p.length_seconds,
            }
            for p in parts
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    width = max(len("partition"), *(len(p.label) for p in parts))
    lines = [f"{'partition':<{width}}  {'start (UTC)':<20}  {'end (UTC)':<20}  length"]
    for p in parts:
        start = p.start.strftime("%Y-%m-%dT%H:%M:%SZ")
        end = p.end.strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{p.label:<{width}}  {start:<20}  {end:<20}  {_format_length(p.length_seconds)}")
    lines.append(f"{len(parts)} {args.grain} partition(s) in {args.tz}")
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="backfill", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("partitions", help="list the partitions of a period")
    p.add_argument("--grain", required=True, choices=calendar.GRAINS)
    p.add_argument("--tz", default="UTC", help="IANA time zone (default UTC)")
    p.add_argument("--start", required=True, help="ISO date or date-time (local to --tz if naive)")
    p.add_argument("--end", required=True, help="exclusive end, same forms as --start")
    p.add_argument("--align", default="strict", choices=("strict", "expand"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_partitions)

    lint_cli.add_parser(sub)
    plan_cli.add_parser(sub)
    run_cli.add_parsers(sub)

    audit_cli.add_parsers(sub)
    audit_cli.add_demo_parser(sub)
    from .dbt import add_dbt_options

    add_dbt_options(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2),
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except BackfillError as exc:
        sys.stderr.write(f"backfill: error: {exc}\n")
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
