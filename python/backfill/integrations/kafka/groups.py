"""Moving a streaming consumer group back to a period's start, safely.

>>> reset = plan_reset(settings, "orders-etl", "orders", to=start)     # doctest: +SKIP
>>> print(reset)                 # per partition: current and new offset (a dry run)
>>> apply_offsets(settings, reset.group, reset.topic, reset.new)       # doctest: +SKIP

Like ``kafka-consumer-groups --reset-offsets --to-datetime``: the new offset of a partition is
the first record at or after ``to`` (the latest offset when there is none). Offsets can only be
changed while the group has no active member (the broker refuses otherwise, and a member would
overwrite them with its next commit): :func:`apply_offsets` refuses naming the members' ids.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConflictError
from . import client
from .settings import KafkaSettings

log = logging.getLogger(__name__)

__all__ = ["GroupReset", "apply_offsets", "committed_offsets", "group_members", "plan_reset"]

#: what the broker answers for a partition the group never committed
NO_OFFSET = -1


@dataclass(frozen=True)
class GroupReset:
    """A planned reset: per partition the group's committed offset and the new one."""

    group: str
    topic: str
    to: dt.datetime
    current: Mapping[int, int]  # NO_OFFSET: nothing committed
    new: Mapping[int, int]
    members: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [
            f"reset group {self.group} on topic {self.topic} to "
            f"{self.to.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
            f"  {'partition':>9}  {'current':>10}  {'new':>10}  {'lag change':>10}",
        ]
        for p in sorted(self.new):
            cur = self.current.get(p, NO_OFFSET)
            shown = "-" if cur < 0 else str(cur)
            change = "-" if cur < 0 else f"{cur - self.new[p]:+d}"
            lines.append(f"  {p:>9}  {shown:>10}  {self.new[p]:>10}  {change:>10}")
        if self.members:
            lines.append(f"  active members: {', '.join(self.members)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "topic": self.topic,
            "to": self.to.isoformat(),
            "partitions": [
                {"partition": p, "current": self.current.get(p, NO_OFFSET), "new": self.new[p]}
                for p in sorted(self.new)
            ],
            "members": list(self.members),
        }


def committed_offsets(
    cfg: KafkaSettings, group: str, topic: str, parts: list[int]
) -> dict[int, int]:
    """partition -> the group's committed offset (NO_OFFSET when none)."""
    k = client._kafka()
    req = [k.ConsumerGroupTopicPartitions(group, [k.TopicPartition(topic, p) for p in parts])]
    deadline = time.monotonic() + cfg.timeout
    while True:  # a group in the middle of a rebalance answers with a retriable error
        try:
            got = next(iter(client.admin_call(cfg, "list_consumer_group_offsets", req).values()))
            break
        except client.broker_errors() as exc:  # a bug is not retried until the deadline
            if time.monotonic() > deadline:
                raise client.BrokerError(
                    f"Kafka broker {cfg.bootstrap}: reading the offsets "
                    f"of group {group!r} failed: {exc!r}"
                ) from None
            time.sleep(0.3)
    return {
        tp.partition: (tp.offset if tp.offset >= 0 else NO_OFFSET) for tp in got.topic_partitions
    }


def group_members(cfg: KafkaSettings, group: str) -> tuple[str, ...]:
    """The member ids of the group's active members (none for an empty or unknown group)."""
    try:
        desc = client.admin_call(cfg, "describe_consumer_groups", [group])[group]
    except client.broker_errors() as exc:
        raise client.BrokerError(
            f"Kafka broker {cfg.bootstrap}: describing group {group!r} failed: {exc}"
        ) from None
    return tuple(sorted(m.member_id for m in desc.members))


def plan_reset(cfg: KafkaSettings, group: str, topic: str, to: dt.datetime) -> GroupReset:
    """The dry run: current and new offsets per partition, and the active members."""
    parts = client.partitions(cfg, topic)
    new = client.list_offsets(cfg, topic, parts, client.to_ms(to))
    return GroupReset(
        group,
        topic,
        to,
        committed_offsets(cfg, group, topic, parts),
        new,
        group_members(cfg, group),
    )


def apply_offsets(cfg: KafkaSettings, group: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Commits ``offsets`` for the group; ConflictError naming the members while it has any."""
    members = group_members(cfg, group)
    if members:
        raise ConflictError(
            f"group {group!r} has {len(members)} active member(s): "
            f"{', '.join(members)}; stop its consumers first (offsets of a group "
            "with members cannot be changed, and would be overwritten)"
        )
    k = client._kafka()
    tps = [k.TopicPartition(topic, int(p), int(o)) for p, o in sorted(offsets.items()) if o >= 0]
    if not tps:
        return
    try:
        client.admin_call(
            cfg, "alter_consumer_group_offsets", [k.ConsumerGroupTopicPartitions(group, tps)]
        )
    except client.broker_errors() as exc:
        raise client.BrokerError(
            f"Kafka broker {cfg.bootstrap}: changing the offsets of group {group!r} failed: {exc}"
        ) from None
    log.info("group %s topic %s: offsets set to %s", group, topic, dict(offsets))
