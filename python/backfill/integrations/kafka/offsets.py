"""Resetting a streaming consumer group to a period's start, recorded and undoable (what
``backfill replay reset-group`` calls).

>>> cfg = topic_settings(project, "orders")                             # doctest: +SKIP
>>> planned = plan_group_reset(cfg, ledger, "orders-etl", "orders", to=start)  # doctest: +SKIP
>>> print(planned.reset)            # the dry run: per partition the current and new offset
>>> apply_group_reset(project, ledger, cfg, planned)                    # doctest: +SKIP

:func:`apply_group_reset` commits the new offsets (ConflictError naming the members while the
group has any), then records the offsets it replaced in the ledger (``offset_resets``, a ledger
operation: the state lives there) and in the warehouse changelog (model ``kafka:<topic>``,
measure ``offset``). An undo (``undo=True``) plans the offsets the latest reset not yet undone
replaced.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._stamps import utcnow, who
from ...engines.base import PUBLISHED, PublishRequest
from ...engines.registry import engine_for
from ...errors import InvalidInputError, NotFoundError
from ...model.landing import landing_models
from .groups import GroupReset, apply_offsets, plan_reset
from .settings import KafkaSettings, kafka_settings

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project
    from ...run import LedgerBackend

__all__ = [
    "PlannedReset",
    "apply_group_reset",
    "kafka_sources",
    "plan_group_reset",
    "topic_settings",
]


@dataclass(frozen=True)
class PlannedReset:
    """A group reset to apply: the offsets, and the reset_id it undoes (None: a new reset)."""

    reset: GroupReset
    undoes: str | None = None


def kafka_sources(project: Project) -> list[KafkaSettings]:
    """The project's Kafka sources (the settings of its Kafka landing models)."""
    return [s for s in landing_models(project).values() if isinstance(s, KafkaSettings)]


def topic_settings(
    project: Project, topic: str, *, bootstrap: str | None = None, timeout: float = 10.0
) -> KafkaSettings:
    """The settings of the project's Kafka source of ``topic``, or (``bootstrap`` given, or no
    source reads it) of ``topic`` on ``bootstrap``; InvalidInputError naming the project's
    topics when neither."""
    sources = kafka_sources(project)
    found = [s for s in sources if s.topic == topic]
    if found and not bootstrap:
        return found[0]
    if not bootstrap:
        topics = sorted({s.topic for s in sources})
        raise InvalidInputError(
            f"no Kafka source of project {project.name!r} reads topic "
            f"{topic!r} (its topics: {', '.join(topics) or 'none'});"
            " pass --bootstrap HOST:PORT"
        )
    return kafka_settings(
        {"bootstrap": bootstrap, "topic": topic, "columns": {"x": "string"}, "timeout": timeout},
        source=f"kafka.{topic}",
    )


def plan_group_reset(
    cfg: KafkaSettings,
    ledger: LedgerBackend,
    group: str,
    topic: str,
    *,
    to: dt.datetime | None = None,
    undo: bool = False,
) -> PlannedReset:
    """The dry run of moving ``group`` on ``topic`` to ``to`` or (``undo``) back to the offsets
    the latest reset not yet undone replaced (NotFoundError when there is none)."""
    if not undo:
        if to is None:
            raise InvalidInputError(
                "--to is required (the time to move the group to), unless --undo"
            )
        return PlannedReset(plan_reset(cfg, group, topic, to))
    done = ledger.offset_resets(group, topic)
    undone = {r.undoes for r in done if r.undoes}
    todo = [r for r in done if not r.undoes and r.reset_id not in undone]
    if not todo:
        raise NotFoundError(
            f"no reset of group {group!r} on topic {topic!r} is recorded that is not undone already"
        )
    last = todo[-1]
    reset = plan_reset(cfg, group, topic, dt.datetime.fromisoformat(last.target))
    target = {p: o for p, o in last.offsets_old.items() if o >= 0}
    reset = GroupReset(reset.group, reset.topic, reset.to, reset.current, target, reset.members)
    return PlannedReset(reset, last.reset_id)


def apply_group_reset(
    project: Project, ledger: LedgerBackend, cfg: KafkaSettings, planned: PlannedReset
) -> str:
    """Commits the planned offsets (ConflictError naming the members while the group has any),
    records them in the ledger and the changelog; returns the reset_id."""
    reset, undoes = planned.reset, planned.undoes
    apply_offsets(cfg, reset.group, reset.topic, reset.new)
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
                tuple(_changelog(record, reset, what)),
            ),
        )
    finally:
        engine.close()
    return str(record["reset_id"])


def _changelog(record: dict[str, Any], reset: GroupReset, what: str) -> list[tuple[Any, ...]]:
    """The changelog rows of a reset: one per partition, measure ``offset`` old -> new."""
    now = dt.datetime.now(dt.timezone.utc)
    old, new = dict(reset.current), dict(reset.new)
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
