"""``backfill rollback | gc``: take a publication back within the time it keeps what it replaced,
and drop what is kept past that time.

    backfill rollback PUBLICATION --note "..." [--force "why overwriting later changes is fine"]
    backfill gc [--dry-run]

Takes ``--project DIR``, ``--ledger URL`` and ``--json``. Exit 1 when the rollback is refused
(already rolled back, expired, published over since, a backfill of the same partitions running);
2 for usage or input errors (an unknown publication id among them).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ConflictError
from .common import (
    add_ledger_option,
    add_project_options,
    busy,
    dump,
    ledger_from_args,
    open_project,
    write,
)
from .exit_codes import EXIT_FAILED, EXIT_OK
from .helptext import add_command

__all__ = ["add_gc_parser", "add_rollback_parser"]


def add_rollback_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "rollback",
        "take a publication back",
        description="Take a publication back: every model it changed gets back what it "
        "replaced, at once, and consumers are told as for a publish.",
        examples="""\
A publication keeps what it replaced for publish: {keep: 30d} of backfill.yml (`backfill
status` and `backfill changelog` say until when). Refused (exit 1) when it was already rolled
back, its backup expired, something was published over it since (unless --force REASON, which
overwrites that), or a backfill of the same partitions is running. The rollback is itself a
publication: it can be rolled back in turn.

examples:
  backfill rollback pub_3f9a0c2b1d --note "the new discount rule was wrong; back to the old"
  backfill rollback pub_3f9a0c2b1d --note "..." --force "the later fix is redone next\"""",
    )
    p.add_argument("publication", help="the publication id (pub_..., rb_...: backfill changelog)")
    add_project_options(p)
    add_ledger_option(p)
    p.add_argument("--note", required=True, help="what consumers should know (changelog)")
    p.add_argument("--force", metavar="REASON", help="roll back over later changes, saying why")
    p.set_defaults(func=cmd_rollback)


def cmd_rollback(args: argparse.Namespace) -> int:
    project = open_project(args)
    try:
        with busy(f"rolling back {args.publication}..."):
            rb = project.rollback(
                args.publication,
                note=args.note,
                force_reason=args.force,
                ledger=ledger_from_args(args),
            )
    except ConflictError as exc:
        if args.json:
            dump({"rolled_back": False, "error": str(exc)})
        else:
            sys.stderr.write(f"backfill rollback: refused: {exc}\n")
        return EXIT_FAILED
    dump({"rolled_back": True, **rb.to_dict()}) if args.json else write(str(rb))
    return EXIT_OK


def add_gc_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "gc",
        "drop expired backups of publications",
        description="Drop what publications kept past publish: {keep: ...} of backfill.yml "
        "(a backup still in its retention is never touched); on Iceberg, also expire old "
        "snapshots and compact small files.",
        examples="""\
examples:
  backfill gc --dry-run        what would be dropped
  backfill gc""",
    )
    add_project_options(p)
    add_ledger_option(p)
    p.add_argument("--dry-run", action="store_true", help="say what would be dropped, drop nothing")
    p.set_defaults(func=cmd_gc)


def cmd_gc(args: argparse.Namespace) -> int:
    project = open_project(args)
    with busy("collecting garbage..."):
        report = project.gc(dry_run=args.dry_run, ledger=ledger_from_args(args))
    dump(report.to_dict()) if args.json else write(str(report))
    return EXIT_OK
