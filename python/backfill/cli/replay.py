"""``backfill replay reset-group``: move a streaming consumer group back to a period's start.

    backfill replay reset-group orders-etl --topic orders --to 2026-11-01      # the plan only
    backfill replay reset-group orders-etl --topic orders --to 2026-11-01 --execute
    backfill replay reset-group orders-etl --topic orders --undo

Without ``--execute`` it prints, per partition, the group's current and new offset and changes
nothing. ``--execute`` refuses (naming the members' ids) while the group has active members;
the offsets it replaces are recorded in the project's ledger and in the warehouse changelog
(model ``kafka:<topic>``, measure ``offset``), and ``--undo`` puts back those of the latest reset
not yet undone. The broker is the Kafka source of the project whose topic is ``--topic``
(or ``--bootstrap``). Exit 0 done, 1 refused, 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt

from ..api import Project
from ..errors import ConflictError, InvalidInputError
from ..integrations.kafka import apply_group_reset, plan_group_reset, topic_settings
from ..run import ledger_for
from .common import add_ledger_option, dump, ledger_from_args, write
from .exit_codes import EXIT_FAILED, EXIT_OK
from .helptext import add_command

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "replay",
        "replays from Kafka: reset a consumer group's offsets",
        description="Replay a period of a Kafka topic: move a consumer group's offsets back "
        "(and undo it).",
        examples="""\
example:
  backfill replay reset-group orders-etl --topic orders --to 2026-11-01""",
    )
    rsub = p.add_subparsers(dest="replay_command", required=True, metavar="COMMAND")
    r = add_command(
        rsub,
        "reset-group",
        "move a consumer group to a time (dry run unless --execute)",
        description="Move a consumer group's offsets on a topic back to a time, so its "
        "consumers replay from there.",
        examples="""\
Without --execute it prints, per partition, the group's current and new offset and changes
nothing. --execute refuses (naming them) while the group has active members; the offsets it
replaces are recorded, and --undo puts back those of the latest reset. The broker is that of
the project's Kafka source of --topic, or --bootstrap. Exit 0 done, 1 refused, 2 bad input.

examples:
  backfill replay reset-group orders-etl --topic orders --to 2026-11-01      (what would move)
  backfill replay reset-group orders-etl --topic orders --to 2026-11-01 --execute
  backfill replay reset-group orders-etl --topic orders --undo""",
    )
    r.add_argument("group", help="the consumer group id")
    r.add_argument("--topic", required=True, help="the topic whose partitions move")
    r.add_argument(
        "--to",
        help="ISO date or date-time (naive: UTC): each partition moves to "
        "its first record at or after it",
    )
    how = r.add_mutually_exclusive_group()
    how.add_argument("--execute", action="store_true", help="apply the reset")
    how.add_argument(
        "--undo", action="store_true", help="restore the offsets the latest reset replaced"
    )
    r.add_argument("--project", default=".", help="project directory (default: current)")
    r.add_argument("--bootstrap", help="broker list (default: the project's source of --topic)")
    r.add_argument("--timeout", type=float, default=10.0, help="seconds per broker call")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    add_ledger_option(r)
    r.set_defaults(func=cmd_reset_group)


def _when(text: str | None) -> dt.datetime:
    if not text:
        raise InvalidInputError("--to is required (the time to move the group to), unless --undo")
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            f"--to {text!r} is not an ISO date or date-time, e.g. "
            "2026-11-01 or 2026-11-01T06:00:00Z"
        ) from None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def cmd_reset_group(args: argparse.Namespace) -> int:
    project = Project.load(args.project)
    cfg = topic_settings(project, args.topic, bootstrap=args.bootstrap, timeout=args.timeout)
    ledger = ledger_from_args(args) or ledger_for(project)
    to = None if args.undo else _when(args.to)
    planned = plan_group_reset(cfg, ledger, args.group, args.topic, to=to, undo=args.undo)
    if args.json:
        dump({**planned.reset.to_dict(), "executed": bool(args.execute or args.undo)})
    else:
        write(str(planned.reset) + "\n")
    if not (args.execute or args.undo):
        write("dry run: nothing changed (--execute applies it)\n") if not args.json else None
        return EXIT_OK
    try:
        reset_id = apply_group_reset(project, ledger, cfg, planned)
    except ConflictError as exc:
        write(f"refused: {exc}\n")
        return EXIT_FAILED
    if not args.json:
        write(
            f"{'undone' if planned.undoes else 'applied'}: {reset_id} (the old offsets are "
            "in the ledger and the changelog)\n"
        )
    return EXIT_OK
