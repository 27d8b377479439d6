"""Sources that come from a Kafka topic: their settings, and the landing model each one gets.

>>> cfg = kafka_settings({"bootstrap": "127.0.0.1:9092", "topic": "orders", "format": "json",
...                       "event_time": "ordered_at", "key": "order_id", "lateness": "2h",
...                       "columns": {"order_id": "int", "ordered_at": "timestamp"}},
...                      source="raw.orders")
>>> cfg.lateness
datetime.timedelta(seconds=7200)

A Kafka source lands in a *landing model* (``lands_in``, default ``<schema>_<table>``): a model
like any other (the source's grain, strategy ``replace``, event_time the ``event_time`` field),
whose tasks read their period's records from the topic instead of running SQL. Models read the
landed rows with ``ref("<lands_in>")``. Only settings live here (no client): :mod:`.client` talks
to the broker. :class:`.source.KafkaSource` adds the reads.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError

__all__ = [
    "COLUMN_TYPES",
    "KAFKA_KEYS",
    "META_COLUMNS",
    "RECORD_TIMESTAMP",
    "KafkaSettings",
    "kafka_settings",
    "parse_duration",
]

KAFKA_KEYS = (
    "bootstrap",
    "topic",
    "format",
    "event_time",
    "key",
    "lateness",
    "columns",
    "schema",
    "timeout",
    "config",
    "dead_letter",
)
#: Column types of a landing table (mapped to Arrow by :mod:`.landing`).
COLUMN_TYPES = ("int", "float", "string", "bool", "timestamp", "date")
#: event_time value that places a record by its Kafka timestamp instead of a field.
RECORD_TIMESTAMP = "record_timestamp"
#: Columns every landed row carries besides the record's fields: where in the log it came from.
META_COLUMNS = ("_kafka_partition", "_kafka_offset", "_kafka_timestamp")

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)\s*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(value: object, what: str) -> dt.timedelta:
    """``"2h"``, ``"30m"``, ``"0s"``, a number of seconds or a timedelta -> timedelta (>= 0)."""
    if isinstance(value, dt.timedelta) and value >= dt.timedelta(0):
        return value
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return dt.timedelta(seconds=float(value))
        if isinstance(value, str) and (m := _DURATION.match(value)):
            return dt.timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])
    except OverflowError:  # past timedelta's 999999999 days, or inf (found by fuzzing)
        raise InvalidInputError(
            f"{what} {value!r} is too long a duration; expected at most 999999999 days"
        ) from None
    raise InvalidInputError(
        f"{what} {value!r} is not a duration; expected e.g. '2h', '30m', "
        "'0s', '1d' or a number of seconds"
    )


@dataclass(frozen=True)
class KafkaSettings:
    """Where a source's records are and how to read them."""

    source: str
    bootstrap: str
    topic: str
    format: str  # json | avro
    event_time: str  # a field of the value, or RECORD_TIMESTAMP
    key: str | None
    lateness: dt.timedelta
    columns: Mapping[str, str]
    lands_in: str
    avro_schema: Mapping[str, Any] | None = None
    timeout: float = 10.0  # seconds any broker call may take (unreachable broker: bounded)
    config: Mapping[str, str] = field(default_factory=dict)  # extra librdkafka settings
    #: table that records which cannot be decoded go to, instead of failing the task
    dead_letter: str | None = None

    @property
    def time_column(self) -> str:
        """The landing table's event-time column."""
        return "_kafka_timestamp" if self.event_time == RECORD_TIMESTAMP else self.event_time


def _str(cfg: Mapping[str, Any], key: str, what: str, default: str | None = None) -> str:
    value = cfg.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{what}: kafka.{key} {value!r} must be a non-empty string")
    return value


def kafka_settings(
    raw: object, *, source: str, lands_in: str | None = None, root: Path | None = None
) -> KafkaSettings:
    """Checks a source's ``kafka:`` mapping (see the module doc); raises InvalidInputError
    naming the bad value and what was expected. ``root`` resolves a relative Avro schema file.
    (:func:`.source.kafka_source`, the entry point, adds the reads.)"""
    what = f"source {source!r}"
    cfg = _mapping(raw, what)
    fmt = cfg.get("format", "json")
    if fmt not in ("json", "avro"):
        raise InvalidInputError(f"{what}: kafka.format {fmt!r}: expected json or avro")
    cols = _columns(cfg.get("columns"), what)
    event_time = _event_time(cfg, cols, what)
    key = cfg.get("key")
    if key is not None and (not isinstance(key, str) or key not in cols):
        raise InvalidInputError(
            f"{what}: kafka.key {key!r} must name one of kafka.columns ({', '.join(cols)})"
        )
    timeout = _timeout(cfg.get("timeout", 10), what)
    extra = cfg.get("config") or {}
    if not isinstance(extra, Mapping):
        raise InvalidInputError(f"{what}: kafka.config must map librdkafka settings to values")
    schema = _avro_schema(cfg.get("schema"), what, root) if fmt == "avro" else None
    if fmt == "json" and cfg.get("schema") is not None:
        raise InvalidInputError(f"{what}: kafka.schema is for format avro only")
    table = source.split(".")[-1]
    schema_name = source.split(".")[0] if "." in source else "kafka"
    lands_in = lands_in or f"{schema_name}_{table}"
    dead_letter = _dead_letter(cfg.get("dead_letter"), lands_in, what)
    return KafkaSettings(
        source=source,
        bootstrap=_str(cfg, "bootstrap", what),
        topic=_str(cfg, "topic", what),
        format=str(fmt),
        event_time=event_time,
        key=key,
        lateness=parse_duration(cfg.get("lateness", "0s"), f"{what}: kafka.lateness"),
        columns=cols,
        lands_in=lands_in,
        avro_schema=schema,
        timeout=timeout,
        config={str(k): str(v) for k, v in extra.items()},
        dead_letter=dead_letter,
    )


def _mapping(raw: object, what: str) -> Mapping[str, Any]:
    """The ``kafka:`` mapping, its keys checked."""
    if not isinstance(raw, Mapping):
        raise InvalidInputError(
            f"{what}: kafka must be a mapping with bootstrap, topic, format, "
            f"event_time, columns; got {raw!r}"
        )
    unknown = [k for k in raw if k not in KAFKA_KEYS]
    if unknown:
        raise InvalidInputError(
            f"{what}: unknown kafka key {unknown[0]!r}; expected one of {', '.join(KAFKA_KEYS)}"
        )
    return raw


def _columns(columns: object, what: str) -> dict[str, str]:
    """``kafka.columns``: field -> one of COLUMN_TYPES, no name of META_COLUMNS."""
    if not isinstance(columns, Mapping) or not columns:
        raise InvalidInputError(
            f"{what}: kafka.columns must map each field of the records to a "
            f"type ({', '.join(COLUMN_TYPES)}); got {columns!r}"
        )
    cols = {str(k): str(v) for k, v in columns.items()}
    for name, kind in cols.items():
        if kind not in COLUMN_TYPES:
            raise InvalidInputError(
                f"{what}: kafka.columns.{name} type {kind!r}: expected one "
                f"of {', '.join(COLUMN_TYPES)}"
            )
        if name in META_COLUMNS:
            raise InvalidInputError(
                f"{what}: kafka.columns.{name}: the name is reserved for "
                "the record's position in the log"
            )
    return cols


def _event_time(cfg: Mapping[str, Any], cols: Mapping[str, str], what: str) -> str:
    """``kafka.event_time``: a timestamp/date column, or RECORD_TIMESTAMP (the default)."""
    event_time = _str(cfg, "event_time", what, RECORD_TIMESTAMP)
    if event_time != RECORD_TIMESTAMP and cols.get(event_time) not in ("timestamp", "date"):
        raise InvalidInputError(
            f"{what}: kafka.event_time {event_time!r} must be a column of "
            f"type timestamp in kafka.columns, or {RECORD_TIMESTAMP!r}"
        )
    return event_time


def _timeout(timeout: object, what: str) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidInputError(
            f"{what}: kafka.timeout {timeout!r} must be a positive number of seconds"
        )
    return float(timeout)


def _dead_letter(dead_letter: object, lands_in: str, what: str) -> str | None:
    """``kafka.dead_letter``: a table name other than the landing table's, or None."""
    if dead_letter is None:
        return None
    if not isinstance(dead_letter, str) or not _IDENT.match(dead_letter):
        raise InvalidInputError(
            f"{what}: kafka.dead_letter {dead_letter!r} must be a table name "
            "(letters, digits, underscores)"
        )
    if dead_letter == lands_in:
        raise InvalidInputError(
            f"{what}: kafka.dead_letter {dead_letter!r} is the landing table; name another table"
        )
    return dead_letter


def _avro_schema(value: object, what: str, root: Path | None) -> Mapping[str, Any]:
    """An Avro record schema: a mapping, or a path to an ``.avsc`` file (JSON)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        path = Path(value)
        if not path.is_absolute() and root is not None:
            path = root / path
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInputError(
                f"{what}: kafka.schema {value!r}: cannot read an Avro "
                f"schema (JSON) from {path}: {exc}"
            ) from None
        if isinstance(loaded, Mapping):
            return dict(loaded)
    raise InvalidInputError(
        f"{what}: format avro needs kafka.schema, the writer's Avro record "
        "schema (a mapping or an .avsc file path)"
    )
