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
import json
import uuid
from typing import Any

from .._stamps import utcnow, who
from ..api import Project
from ..engines.base import PUBLISHED, PublishRequest
from ..engines.registry import engine_for
from ..errors import ConflictError, InvalidInputError, NotFoundError
from ..model.kafka import KafkaSettings, kafka_settings
from ..replay import landing_models
from ..replay.groups import GroupReset, apply_offsets, plan_reset
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


def _settings(project: Project, args: argparse.Namespace) -> KafkaSettings:
    found = [s for s in landing_models(project).values() if s.topic == args.topic]
    if args.bootstrap or not found:
        if not args.bootstrap:
            topics = sorted({s.topic for s in landing_models(project).values()})
            raise InvalidInputError(
                f"no Kafka source of project {project.name!r} reads topic "
                f"{args.topic!r} (its topics: {', '.join(topics) or 'none'});"
                " pass --bootstrap HOST:PORT"
            )
        return kafka_settings(
            {
                "bootstrap": args.bootstrap,
                "topic": args.topic,
                "columns": {"x": "string"},
                "timeout": args.timeout,
            },
            source=f"kafka.{args.topic}",
        )
    return found[0]


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


def _changelog(
    record: dict[str, Any], reset: GroupReset, old: dict[int, int], new: dict[int, int], what: str
) -> list[tuple[Any, ...]]:
    now = dt.datetime.now(dt.timezone.utc)
    return [
        (
            record["reset_id"],
            record["reset_id"],
            now,
            record["created_by"],
            what,
            f"consumer group {reset.group} offsets of topic {reset.topic}",
            None,
            f"kafka:{reset.topic}",
            f"{reset.group}/{p}",
            reset.to,
            None,
            1,
            None,
            None,
            None,
            None,
            None,
            "offset",
            old.get(p, -1),
            new[p],
            new[p] - old.get(p, -1) if old.get(p, -1) >= 0 else None,
            None,
            "integer",
        )
        for p in sorted(new)
    ]


def cmd_reset_group(args: argparse.Namespace) -> int:
    project = Project.load(args.project)
    cfg = _settings(project, args)
    ledger = ledger_from_args(args) or ledger_for(project)
    if args.undo:
        done = ledger.offset_resets(args.group, args.topic)
        undone = {r.undoes for r in done if r.undoes}
        todo = [r for r in done if not r.undoes and r.reset_id not in undone]
        if not todo:
            raise NotFoundError(
                f"no reset of group {args.group!r} on topic {args.topic!r} is "
                "recorded that is not undone already"
            )
        last = todo[-1]
        old = last.offsets_old
        reset = plan_reset(cfg, args.group, args.topic, dt.datetime.fromisoformat(last.target))
        target = {p: o for p, o in old.items() if o >= 0}
        reset = GroupReset(reset.group, reset.topic, reset.to, reset.current, target, reset.members)
        undoes: str | None = last.reset_id
    else:
        reset = plan_reset(cfg, args.group, args.topic, _when(args.to))
        undoes = None
    if args.json:
        dump({**reset.to_dict(), "executed": bool(args.execute or args.undo)})
    else:
        write(str(reset) + "\n")
    if not (args.execute or args.undo):
        write("dry run: nothing changed (--execute applies it)\n") if not args.json else None
        return EXIT_OK
    try:
        apply_offsets(cfg, reset.group, reset.topic, reset.new)
    except ConflictError as exc:
        write(f"refused: {exc}\n")
        return EXIT_FAILED
    record = {
        "reset_id": f"reset_{uuid.uuid4().hex[:12]}",
        "group_id": reset.group,
        "topic": reset.topic,
        "created_at": utcnow(),
        "created_by": who(),
        "target": reset.to.isoformat(),
        "offsets_old": json.dumps({str(p): o for p, o in reset.current.items()}),
        "offsets_new": json.dumps({str(p): o for p, o in reset.new.items()}),
        "undoes": undoes,
    }
    ledger.record_offset_reset(record)
    what = f"undo of {undoes}" if undoes else "reset consumer group offsets"
    engine = engine_for(project)
    try:
        engine.publish(
            project,
            PublishRequest(
                str(record["reset_id"]),
                PUBLISHED,
                (),
                tuple(_changelog(record, reset, dict(reset.current), dict(reset.new), what)),
            ),
        )
    finally:
        engine.close()
    if not args.json:
        write(
            f"{'undone' if undoes else 'applied'}: {record['reset_id']} (the old offsets are "
            "in the ledger and the changelog)\n"
        )
    return EXIT_OK
