"""Talking to the broker (confluent-kafka / librdkafka): clients with bounded timeouts, the
topic's partitions, offsets by spec, and errors that say which broker and topic failed.

Every call here is bounded by the source's ``timeout``: an unreachable broker is a
:class:`BrokerError` after that many seconds, never a hang.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ..._extras import extra_required
from ...engines.base import TaskFailure
from ...errors import NotFoundError
from .settings import KafkaSettings

log = logging.getLogger(__name__)

__all__ = [
    "BrokerError",
    "admin",
    "admin_call",
    "broker_errors",
    "consumer",
    "from_ms",
    "list_offsets",
    "partitions",
    "to_ms",
]

UTC = dt.timezone.utc


class BrokerError(TaskFailure):
    """The broker could not be reached or refused a request; the message names it. Transient:
    a task that met it is retried."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


def _kafka() -> Any:
    with extra_required("replaying from Kafka", "kafka"):
        # confluent-kafka ships type hints (py.typed) from 2.13 on; before, it is untyped.
        import confluent_kafka  # type: ignore[import-untyped, unused-ignore]

        # A submodule is an attribute of its package only once imported; confluent-kafka 2.16
        # no longer imports ``admin`` from its __init__.
        import confluent_kafka.admin  # type: ignore[import-untyped, unused-ignore]
    return confluent_kafka


def broker_errors() -> tuple[type[Exception], ...]:
    """What a failed request to the broker raises: librdkafka's KafkaException (a refused
    connection, a timeout, an error code in the answer; KafkaError is its payload, not an
    exception), or a request future that did not resolve in time. Anything else (an
    AttributeError, a TypeError) is a bug and must not be reported as the broker's failure."""
    return (_kafka().KafkaException, concurrent.futures.TimeoutError)


def _base(bootstrap: str, timeout: float, extra: Mapping[str, str]) -> dict[str, Any]:
    ms = str(max(1000, int(timeout * 1000)))
    # librdkafka logs every refused connection on stderr at level 3; ours say it once, in the
    # error raised after the timeout.
    return {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": ms,
        "log_level": 2,
        "socket.connection.setup.timeout.ms": ms,
        **extra,
    }


def admin(cfg: KafkaSettings | str, timeout: float = 10.0) -> Any:
    """An AdminClient for a source's broker (or a bootstrap string)."""
    k = _kafka()
    if isinstance(cfg, KafkaSettings):
        return k.admin.AdminClient(_base(cfg.bootstrap, cfg.timeout, cfg.config))
    return k.admin.AdminClient(_base(cfg, timeout, {}))


def admin_call(cfg: KafkaSettings, method: str, *args: Any, **kwargs: Any) -> dict[Any, Any]:
    """Runs an AdminClient request and waits for all its futures: key -> result.

    The client must stay referenced until its futures resolve: librdkafka's background thread
    resolves them through the client, and a client that is garbage-collected right after the
    request (``admin(cfg).method(...)``) leaves them pending forever, which looked like a broker
    timeout (see confluent-kafka-python issue #1242 for the same hang from a released handle).
    Exceptions from the request or its futures propagate to the caller."""
    ad = admin(cfg)
    futures = getattr(ad, method)(*args, request_timeout=cfg.timeout, **kwargs)
    results = {key: f.result(timeout=cfg.timeout + 1) for key, f in futures.items()}
    del ad  # only now: see above
    return results


def consumer(cfg: KafkaSettings, **extra: str) -> Any:
    """A Consumer used with ``assign()`` only: it never joins or commits to a group (its
    group.id is a throwaway that librdkafka wants set), and an offset out of range is an error
    instead of a silent jump to another offset."""
    k = _kafka()
    conf = {
        **_base(cfg.bootstrap, cfg.timeout, cfg.config),
        "group.id": f"backfill-replay-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        **extra,
    }
    return k.Consumer(conf)


def to_ms(t: dt.datetime) -> int:
    return round(t.astimezone(UTC).timestamp() * 1000)


def from_ms(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


def _fail(what: str, bootstrap: str, exc: BaseException) -> BrokerError:
    return BrokerError(f"Kafka broker {bootstrap}: {what} failed: {exc}")


def partitions(cfg: KafkaSettings, topic: str | None = None) -> list[int]:
    """The topic's partition ids; NotFoundError naming the topics there are when it has none."""
    topic = topic or cfg.topic
    try:
        md = admin(cfg).list_topics(timeout=cfg.timeout)
    except broker_errors() as exc:
        raise BrokerError(
            f"Kafka broker {cfg.bootstrap} did not answer within {cfg.timeout:g}s "
            f"(source {cfg.source!r}, topic {topic!r}): {exc}"
        ) from None
    found = md.topics.get(topic)
    if found is None or found.error is not None:
        names = sorted(t for t in md.topics if not t.startswith("__"))
        raise NotFoundError(
            f"topic {topic!r} (source {cfg.source!r}) does not exist on "
            f"{cfg.bootstrap}; topics there: {', '.join(names) or 'none'}"
        )
    return sorted(found.partitions)


def list_offsets(
    cfg: KafkaSettings,
    topic: str,
    parts: Iterable[int],
    spec: str | int,
) -> dict[int, int]:
    """partition -> offset for ``spec``: ``"earliest"`` (the log start: the oldest retained
    offset), ``"latest"`` (the next offset to be written) or a timestamp in ms (the first offset
    whose record timestamp is at or after it; the latest offset when there is none)."""
    k = _kafka()
    ad = admin(cfg)
    spec_obj = (
        k.admin.OffsetSpec.earliest()
        if spec == "earliest"
        else k.admin.OffsetSpec.latest()
        if spec == "latest"
        else k.admin.OffsetSpec.for_timestamp(int(spec))
    )
    req = {k.TopicPartition(topic, p): spec_obj for p in parts}
    try:
        futures = ad.list_offsets(req, request_timeout=cfg.timeout)
        got = {tp.partition: f.result(timeout=cfg.timeout + 1).offset for tp, f in futures.items()}
    except broker_errors() as exc:
        raise _fail(f"listing offsets ({spec}) of topic {topic!r}", cfg.bootstrap, exc) from None
    if isinstance(spec, int) and any(v < 0 for v in got.values()):
        latest = list_offsets(cfg, topic, [p for p, v in got.items() if v < 0], "latest")
        got.update(latest)
    return got


def cleanup_policy(cfg: KafkaSettings, topic: str) -> str:
    """The topic's ``cleanup.policy`` (``delete``, ``compact`` or both); ``delete`` when the
    broker will not say."""
    k = _kafka()
    res = k.admin.ConfigResource(k.admin.ResourceType.TOPIC, topic)
    unreadable: tuple[type[Exception], ...] = (*broker_errors(), KeyError)
    try:
        entries = next(iter(admin_call(cfg, "describe_configs", [res]).values()))
        return str(entries["cleanup.policy"].value)
    except unreadable:  # a broker that hides configs: assume the default
        log.debug("topic %s: cleanup.policy not readable", topic, exc_info=True)
        return "delete"
