"""``backfill publish | discard | changelog``: end a backfill, and tell consumers what changed.

    backfill publish [ID] --note "..." [--force "why a failed gate is fine"]
    backfill discard [ID]
    backfill changelog [--format text|markdown|html|json] [--since DATE] [--model M]
                       [--backfill ID]

All take ``--project DIR`` and ``--json`` (for changelog the same as ``--format json``).
Exit 1 when publish or discard is refused (a failed gate, a stale audit, an already published
backfill); 2 for usage or input errors.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ConflictError
from ..publish import FORMATS
from .common import (
    add_ledger_option,
    add_project_options,
    busy,
    dump,
    open_backfill,
    open_project,
    write,
)
from .exit_codes import EXIT_FAILED, EXIT_OK
from .helptext import add_command

__all__ = ["add_changelog_parser", "add_discard_parser", "add_publish_parser"]


def add_publish_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "publish",
        "publish an audited backfill atomically",
        description="Publish an audited backfill: its partitions replace the published ones "
        "in one swap.",
        examples="""\
The changelog records it (with --note), and the consumers named in backfill.yml are told.
Refused (exit 1) when it was not audited, a gate failed (unless --force REASON), the audit
area or the published data changed since the audit, or it is already published.

examples:
  backfill publish --note "revenue from 1 Aug 2026 about 2% lower (discounts fixed)"
  backfill publish ID --note "..." --force "the removed rows were test orders\"""",
    )
    p.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    add_project_options(p)
    add_ledger_option(p)
    p.add_argument("--note", required=True, help="what consumers should know (changelog)")
    p.add_argument("--force", metavar="REASON", help="publish despite failed gates, saying why")
    p.set_defaults(func=cmd_publish)


def add_discard_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "discard",
        "drop an unpublished backfill's audit area",
        description="Drop an unpublished backfill's audit area; the published tables stay as "
        "they are.",
        examples="""\
example:
  backfill discard ID""",
    )
    p.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    add_project_options(p)
    add_ledger_option(p)
    p.set_defaults(func=cmd_discard)


def add_changelog_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "changelog",
        "what publications changed, for consumers",
        description="Show what publications and forward-only changes changed, newest first, "
        "and whom they told.",
        examples="""\
examples:
  backfill changelog --since 2026-08-01
  backfill changelog --model fct_daily_sales --format markdown
  backfill changelog --format html > changelog.html     a page finance can read""",
    )
    add_project_options(p)
    p.add_argument("--backfill", metavar="ID", help="only this backfill's publication")
    p.add_argument("--format", choices=FORMATS, default="text", help="output (default text)")
    p.add_argument(
        "--since",
        metavar="DATE",
        help="only changes at or after this ISO date or date-time (naive: UTC)",
    )
    p.add_argument("--model", help="only changes of this model")
    p.set_defaults(func=cmd_changelog)


def cmd_publish(args: argparse.Namespace) -> int:
    bf = open_backfill(args)
    try:
        with busy(f"publishing {bf.id}..."):
            pub = bf.publish(note=args.note, force_reason=args.force)
    except ConflictError as exc:
        if args.json:
            dump({"published": False, "error": str(exc)})
        else:
            sys.stderr.write(f"backfill publish: refused: {exc}\n")
        return EXIT_FAILED
    dump({"published": True, **pub.to_dict()}) if args.json else write(str(pub))
    return EXIT_OK


def cmd_discard(args: argparse.Namespace) -> int:
    bf = open_backfill(args)
    try:
        bf.discard()
    except ConflictError as exc:
        sys.stderr.write(f"backfill discard: refused: {exc}\n")
        return EXIT_FAILED
    dump({"discarded": bf.id}) if args.json else write(f"discarded {bf.id} (audit area dropped)")
    return EXIT_OK


def cmd_changelog(args: argparse.Namespace) -> int:
    log = open_project(args).changelog(args.backfill, since=args.since, model=args.model)
    write(log.format("json" if args.json else args.format))
    return EXIT_OK
