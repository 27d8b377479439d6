"""The retention check: can a period still be replayed from a topic, partition by partition?

>>> check = check_source(settings, "raw_orders", start, end)            # doctest: +SKIP
>>> print(check)      # per partition: oldest retained offset and time, from/to offsets, records
>>> check.findings    # RETENTION (error) when the log no longer starts early enough

For each partition: the earliest retained offset (the log start) and the timestamp of the record
there, the latest offset, and the offset for the period's start minus ``lateness``
(``for_timestamp``: the first record at or after that time). ``for_timestamp`` answers with the
log start for a time older than anything retained, without saying so, so the record at the log
start is read and its time compared with the period's start: a partition whose log start moved
past offset 0 and whose oldest retained record is younger than the replay's start has lost
records the replay needs. O(partitions) broker calls, independent of the period.

A range reads from that offset to the latest one, not to ``for_timestamp`` of the period's end
plus ``lateness``. A partition is in arrival order, not in record-time order: a record produced
after records of later periods (a late one within the lateness, or one a producer sends again
with its original time) lies after the first record timestamped at or after the end, and a range
that stopped there missed it without a sign -- a second replay of a period finished "done"
without reading what had arrived since the first. The range's start is exact (every record
before it has an older time); no offset short of the log end bounds the records of a period, so
the landing task reads to the latest offset and keeps the records whose time is the period's
(:func:`~.landing.read_period`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidInputError
from ...plan.plan import PlanFinding
from . import client
from .settings import KafkaSettings

log = logging.getLogger(__name__)

__all__ = ["PartitionRange", "SourceCheck", "check_source", "first_timestamps"]


def _ts(t: dt.datetime | None) -> str:
    return "-" if t is None else t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class PartitionRange:
    """One partition's offsets for a period: read [from_offset, to_offset)."""

    topic: str
    partition: int
    earliest: int  # the oldest retained offset (log start)
    earliest_time: dt.datetime | None  # its record's timestamp (None: nothing retained)
    latest: int  # the next offset to be written (high watermark)
    from_offset: int
    to_offset: int

    @property
    def records(self) -> int:
        """Log positions in the range (control records of transactions included)."""
        return max(0, self.to_offset - self.from_offset)


@dataclass(frozen=True)
class SourceCheck:
    """The retention check of one Kafka source for one period."""

    settings: KafkaSettings
    model: str  # the landing model
    start: dt.datetime
    end: dt.datetime
    ranges: list[PartitionRange]
    cleanup_policy: str = "delete"
    findings: list[PlanFinding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    @property
    def records(self) -> int:
        return sum(r.records for r in self.ranges)

    def __str__(self) -> str:
        s = self.settings
        head = (
            f"replay {s.source} (topic {s.topic}) into {self.model}: [{_ts(self.start)}, "
            f"{_ts(self.end)}) UTC, lateness {s.lateness}; {self.records} record(s) to read"
        )
        lines = [
            head,
            f"  {'partition':>9}  {'log start':>10}  {'oldest retained (UTC)':<21}  "
            f"{'latest':>10}  {'from':>10}  {'to':>10}  {'records':>8}",
        ]
        for r in self.ranges:
            lines.append(
                f"  {r.partition:>9}  {r.earliest:>10}  {_ts(r.earliest_time):<21}  "
                f"{r.latest:>10}  {r.from_offset:>10}  {r.to_offset:>10}  "
                f"{r.records:>8}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.settings.source,
            "topic": self.settings.topic,
            "model": self.model,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "cleanup_policy": self.cleanup_policy,
            "partitions": [
                {
                    "partition": r.partition,
                    "log_start": r.earliest,
                    "oldest_retained": None
                    if r.earliest_time is None
                    else r.earliest_time.isoformat(),
                    "latest": r.latest,
                    "from": r.from_offset,
                    "to": r.to_offset,
                    "records": r.records,
                }
                for r in self.ranges
            ],
        }

    def to_arrow(self) -> Any:
        import pyarrow as pa  # type: ignore[import-untyped]

        return pa.Table.from_pylist(self.to_dict()["partitions"])

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()


def first_timestamps(
    cfg: KafkaSettings,
    topic: str,
    offsets: Mapping[int, int],
) -> dict[int, dt.datetime]:
    """partition -> the timestamp of the record at ``offsets[partition]`` (the first record at
    or after it: a transaction marker has no record)."""
    if not offsets:
        return {}
    k = client._kafka()
    c = client.consumer(cfg)
    found: dict[int, dt.datetime] = {}
    try:
        c.assign([k.TopicPartition(topic, p, o) for p, o in offsets.items()])
        deadline = time.monotonic() + cfg.timeout
        while len(found) < len(offsets) and time.monotonic() < deadline:
            for msg in c.consume(num_messages=len(offsets), timeout=0.5):
                if msg.error() is not None:
                    raise client.BrokerError(
                        f"Kafka broker {cfg.bootstrap}: reading topic {topic!r}: {msg.error()}"
                    )
                found.setdefault(msg.partition(), client.from_ms(msg.timestamp()[1]))
    finally:
        c.close()
    missing = sorted(set(offsets) - set(found))
    if missing:
        raise client.BrokerError(
            f"Kafka broker {cfg.bootstrap}: no record came back from topic "
            f"{topic!r} partition(s) {missing} within {cfg.timeout:g}s"
        )
    return found


def check_source(
    cfg: KafkaSettings,
    model: str,
    start: dt.datetime,
    end: dt.datetime,
    *,
    now: dt.datetime | None = None,
) -> SourceCheck:
    """Offsets and findings for replaying [start, end) of ``cfg``'s topic (see module doc).
    InvalidInputError for a period that starts in the future; NotFoundError for an unknown
    topic; BrokerError when the broker does not answer within the source's timeout."""
    now = now or dt.datetime.now(dt.timezone.utc)
    if start >= now:
        raise InvalidInputError(
            f"replay of {cfg.source} (topic {cfg.topic}): the period "
            f"[{_ts(start)}, {_ts(end)}) UTC starts in the future (now "
            f"{_ts(now)}); nothing to replay yet"
        )
    topic = cfg.topic
    parts = client.partitions(cfg)
    need = start - cfg.lateness
    earliest = client.list_offsets(cfg, topic, parts, "earliest")
    lo = client.list_offsets(cfg, topic, parts, client.to_ms(need))
    # Asked after lo, so lo <= latest even while producers write (lo of a time past the log end
    # is the log end then).
    latest = client.list_offsets(cfg, topic, parts, "latest")
    oldest = first_timestamps(
        cfg, topic, {p: earliest[p] for p in parts if earliest[p] < latest[p]}
    )
    ranges = [
        PartitionRange(
            topic,
            p,
            earliest[p],
            oldest.get(p),
            latest[p],
            max(lo[p], earliest[p]),
            latest[p],  # to the log end: see the module doc
        )
        for p in parts
    ]
    policy = client.cleanup_policy(cfg, topic)
    findings: list[PlanFinding] = []
    for r in ranges:
        if r.earliest == 0:  # nothing was ever removed from this partition
            continue
        if r.earliest_time is None:
            findings.append(
                PlanFinding(
                    "RETENTION",
                    "error",
                    model,
                    f"topic {topic} partition {r.partition}: every record up to offset "
                    f"{r.earliest} was removed and none is retained, so whether the replay from "
                    f"{_ts(need)} UTC is complete cannot be known; replay from the raw layer "
                    "or the source instead",
                )
            )
        elif r.earliest_time > need:
            gone_to = min(r.earliest_time, end + cfg.lateness)
            findings.append(
                PlanFinding(
                    "RETENTION",
                    "error",
                    model,
                    f"topic {topic} partition {r.partition}: the oldest retained record (offset "
                    f"{r.earliest}) is from {_ts(r.earliest_time)} UTC, after the replay's start "
                    f"{_ts(need)} UTC (period start minus lateness {cfg.lateness}); missing span "
                    f"[{_ts(need)}, {_ts(gone_to)}) UTC (offsets 0..{r.earliest - 1} were "
                    "removed); replay from the raw layer or the source instead",
                )
            )
    if "compact" in policy:
        findings.append(
            PlanFinding(
                "COMPACTED",
                "warning",
                model,
                f"topic {topic} has cleanup.policy={policy}: compaction may have removed records "
                "of the period; in the compacted part of the log only the latest record of each "
                "key is kept, so the replay lands at most one row per key there, not every record "
                "that was produced",
            )
        )
    check = SourceCheck(cfg, model, start, end, ranges, policy, findings)
    log.info("%s", check)
    return check
