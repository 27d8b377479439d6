"""``backfill partitions``: list the partitions of a period (the calendar, no project needed).

backfill partitions --grain day --tz Europe/Berlin --start 2026-10-24 --end 2026-10-27 [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from .. import calendar
from .exit_codes import EXIT_OK
from .helptext import add_command

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "partitions",
        "list the partitions of a period (no project needed)",
        description="List the partitions a grain cuts [START, END) into, in a time zone.",
        examples="""\
examples:
  backfill partitions --grain day --tz Europe/Berlin --start 2026-10-24 --end 2026-10-27
      (2026-10-25 lasts 25h there: the clocks go back)
  backfill partitions --grain month --start 2026-01-15 --end 2026-03-01 --align expand""",
    )
    p.add_argument("--grain", required=True, choices=calendar.GRAINS, help="partition length")
    p.add_argument("--tz", default="UTC", help="IANA time zone (default UTC)")
    p.add_argument("--start", required=True, help="ISO date or date-time (local to --tz if naive)")
    p.add_argument("--end", required=True, help="exclusive end, same forms as --start")
    p.add_argument(
        "--align",
        default="strict",
        choices=("strict", "expand"),
        help="strict (default): START and END must be partition bounds; expand: "
        "widen the period to whole partitions",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_partitions)


def _format_length(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    if hours >= 48 and rest == 0 and hours % 24 == 0:
        return f"{hours // 24}d"
    return f"{hours}h" if minutes == 0 else f"{hours}h{minutes:02d}m"


def cmd_partitions(args: argparse.Namespace) -> int:
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
        length = _format_length(p.length_seconds)
        lines.append(f"{p.label:<{width}}  {start:<20}  {end:<20}  {length}")
    lines.append(f"{len(parts)} {args.grain} partition(s) in {args.tz}")
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK
