"""A landing task's read: its offset ranges, the records timestamped near its period decoded,
the period's records kept.

>>> rows, detail, dead = read_period(settings, "raw_orders", start, end)     # doctest: +SKIP

The ranges are those of the retention check (:func:`~.retention.check_source`) for the task's
period, re-read when the task runs: the log start may have moved since the plan, and a range that
lost records fails the task (RETENTION) rather than landing a partial period. A range runs from
the first record timestamped at or after the period's start minus ``lateness`` to the log end,
since a record of the period may arrive after records of later ones. A Consumer with ``assign()``
(no group) reads each partition from ``from`` up to ``to``, sets aside at once the records whose
record timestamp is outside ``[start - lateness, end + lateness)`` (never decoded, never held:
they belong to other periods, and so do their decoding errors), and keeps a record when

    start <= event_time < end   and   start - lateness <= record timestamp < end + lateness

so a record late by up to ``lateness`` lands in its own period and nothing else does: the result
depends only on the log's contents, not on the order records arrived in, and running the task
twice gives the same rows. A record that cannot be decoded fails the task naming its topic,
partition and offset, unless the source names a ``dead_letter`` table: then it goes there (topic,
partition, offset, record timestamp, key, value bytes, error) and the task lands the rest. A
dead letter belongs to the period of its *record timestamp* (its event time is unknown), so each
one is written by exactly one task, and running that task again replaces it. ``detail`` says
which log positions were read and how many records went to the dead-letter table (the ledger
keeps it).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from ...engines.base import DeadLetters
from ...errors import BackfillError
from . import client
from .retention import PartitionRange, check_source
from .settings import META_COLUMNS, RECORD_TIMESTAMP, KafkaSettings

log = logging.getLogger(__name__)

__all__ = ["DecodeError", "RetentionError", "arrow_schema", "dead_letter_schema", "read_period"]

_BATCH = 10_000


class DecodeError(BackfillError):
    """A record could not be decoded; the message names topic, partition and offset."""


class RetentionError(BackfillError):
    """The log no longer holds the records a period needs (a RETENTION finding, at run time)."""


def arrow_schema(cfg: KafkaSettings) -> Any:
    """The landing table's columns: the declared fields, then where each row came from."""
    import pyarrow as pa  # type: ignore[import-untyped]

    kinds = {
        "int": pa.int64(),
        "float": pa.float64(),
        "string": pa.string(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us"),
        "date": pa.date32(),
    }
    fields = [pa.field(n, kinds[k]) for n, k in cfg.columns.items()]
    return pa.schema(
        [
            *fields,
            pa.field("_kafka_partition", pa.int32()),
            pa.field("_kafka_offset", pa.int64()),
            pa.field("_kafka_timestamp", pa.timestamp("us")),
        ]
    )


def _consume(
    cfg: KafkaSettings, ranges: list[PartitionRange], start: dt.datetime, end: dt.datetime
) -> tuple[list[Any], dict[int, int]]:
    """The messages in the ranges whose record timestamp is in ``[start - lateness, end +
    lateness)``, in partition then offset order, and per partition how many were read."""
    k = client._kafka()
    todo = {r.partition: r for r in ranges if r.records > 0}
    read = dict.fromkeys(todo, 0)
    if not todo:
        return [], read
    lo, hi = client.to_ms(start - cfg.lateness), client.to_ms(end + cfg.lateness)
    c = client.consumer(cfg, **{"fetch.max.bytes": "52428800", "queued.min.messages": "200000"})
    out: dict[int, list[Any]] = {p: [] for p in todo}
    try:
        c.assign([k.TopicPartition(cfg.topic, p, r.from_offset) for p, r in todo.items()])
        idle_since = time.monotonic()
        while todo:
            batch = c.consume(num_messages=_BATCH, timeout=0.2)
            for msg in batch:
                if msg.error() is not None:
                    raise client.BrokerError(
                        f"Kafka broker {cfg.bootstrap}: reading topic {cfg.topic!r}: {msg.error()}"
                    )
                p = msg.partition()
                r = todo.get(p)
                if r is None or msg.offset() >= r.to_offset:
                    continue
                read[p] += 1
                if lo <= msg.timestamp()[1] < hi:
                    out[p].append(msg)
                if msg.offset() >= r.to_offset - 1:
                    del todo[p]
            if batch:
                idle_since = time.monotonic()
                continue
            # A range may end in a transaction marker, which is never delivered: the position
            # says the partition is read up to its end.
            for tp in c.position([k.TopicPartition(cfg.topic, p) for p in list(todo)]):
                if tp.offset >= todo[tp.partition].to_offset:
                    del todo[tp.partition]
            if todo and time.monotonic() - idle_since > cfg.timeout:
                raise client.BrokerError(
                    f"Kafka broker {cfg.bootstrap}: topic {cfg.topic!r} partition(s) "
                    f"{sorted(todo)} sent nothing for {cfg.timeout:g}s before their range ended"
                )
    finally:
        c.close()
    return [m for p in sorted(out) for m in out[p]], read


def _where(cfg: KafkaSettings, msg: Any) -> str:
    return f"topic {cfg.topic} partition {msg.partition()} offset {msg.offset()}"


def _decode_avro(cfg: KafkaSettings, msgs: list[Any]) -> list[Mapping[str, Any]]:
    import io

    import fastavro

    schema = fastavro.parse_schema(dict(cfg.avro_schema or {}))
    out: list[Mapping[str, Any]] = []
    for msg in msgs:
        try:
            out.append(dict(fastavro.schemaless_reader(io.BytesIO(msg.value() or b""), schema)))  # type: ignore[arg-type, unused-ignore]
        # What fastavro raises for bytes that are not a record of the schema (found by feeding
        # it random bytes for every type): a short read (EOFError; IndexError inside a varint),
        # bad UTF-8 or an impossible date (ValueError), a value too large (OverflowError). An
        # AttributeError or TypeError is a bug of ours, not a dead letter.
        except (EOFError, IndexError, ValueError, OverflowError) as exc:
            raise DecodeError(
                f"{_where(cfg, msg)}: not an Avro record of the source's schema: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    return out


def _to_time(value: object, cfg: KafkaSettings, msg: Any, column: str) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        t = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        t = client.from_ms(int(value))  # epoch milliseconds, Kafka's own unit
    elif isinstance(value, str):
        try:
            t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise DecodeError(
                f"{_where(cfg, msg)}: {column} {value!r} is not an ISO-8601 time "
                "or epoch milliseconds"
            ) from None
    else:
        raise DecodeError(f"{_where(cfg, msg)}: {column} {value!r} is not a time")
    if t is not None and t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return t


def _rows_slow(cfg: KafkaSettings, msgs: list[Any]) -> Any:
    """Record by record: precise errors (the offset that failed), any time format."""
    import pyarrow as pa

    schema = arrow_schema(cfg)
    if cfg.format == "avro":
        values = _decode_avro(cfg, msgs)
    else:
        values = []
        for msg in msgs:
            try:
                v = json.loads(msg.value() or b"")
            except ValueError as exc:
                raise DecodeError(f"{_where(cfg, msg)}: not JSON: {exc}") from None
            if not isinstance(v, dict):
                raise DecodeError(
                    f"{_where(cfg, msg)}: expected a JSON object, got {type(v).__name__}"
                )
            values.append(v)
    cols: dict[str, list[Any]] = {n: [] for n in cfg.columns}
    for msg, v in zip(msgs, values, strict=True):
        for name, kind in cfg.columns.items():
            x = v.get(name)
            if kind == "timestamp":
                x = _to_time(x, cfg, msg, name)
            cols[name].append(x)
    try:
        arrays = [pa.array(cols[n], type=schema.field(n).type) for n in cfg.columns]
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        # Name the first record whose field does not fit its declared type.
        for msg, v in zip(msgs, values, strict=True):
            for n in cfg.columns:
                try:
                    pa.array(
                        [v.get(n) if cfg.columns[n] != "timestamp" else None],
                        type=schema.field(n).type,
                    )
                except (pa.ArrowInvalid, pa.ArrowTypeError):
                    raise DecodeError(
                        f"{_where(cfg, msg)}: field {n} {v.get(n)!r} is not a {cfg.columns[n]}"
                    ) from None
        raise DecodeError(f"topic {cfg.topic}: {exc}") from None
    return pa.table(arrays, names=list(cfg.columns))


def _rows_fast(cfg: KafkaSettings, msgs: list[Any]) -> Any:
    """JSON through Arrow's reader in one pass; None when any record needs the slow path."""
    import io

    import pyarrow as pa
    import pyarrow.json as pj  # type: ignore[import-untyped]

    values = [m.value() or b"" for m in msgs]
    if any(b"\n" in v for v in values):
        return None
    fields = [f for f in arrow_schema(cfg) if f.name in cfg.columns]
    opts = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
    try:
        table = pj.read_json(
            io.BytesIO(b"\n".join(values)),
            parse_options=opts,
            read_options=pj.ReadOptions(block_size=1 << 24),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if table.num_rows != len(msgs):
        return None
    return table.select(list(cfg.columns)).combine_chunks()


def decode(cfg: KafkaSettings, msgs: list[Any]) -> Any:
    """The messages as an Arrow table of :func:`arrow_schema` (no filtering)."""
    import pyarrow as pa

    table = _rows_fast(cfg, msgs) if cfg.format == "json" and msgs else None
    if table is None:
        table = _rows_slow(cfg, msgs)
    if cfg.key:  # a record without the key field gets it from the message key
        key = table.column(cfg.key)
        if key.null_count:
            from_msg = pa.array(
                [None if m.key() is None else m.key().decode("utf-8", "replace") for m in msgs]
            ).cast(key.type, safe=False)
            import pyarrow.compute as pc  # type: ignore[import-untyped]

            table = table.set_column(
                table.schema.get_field_index(cfg.key), cfg.key, pc.coalesce(key, from_msg)
            )
    meta = [
        pa.array([m.partition() for m in msgs], pa.int32()),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pa.array([m.timestamp()[1] * 1000 for m in msgs], pa.int64()).cast(pa.timestamp("us")),
    ]
    for name, arr in zip(META_COLUMNS, meta, strict=True):
        table = table.append_column(name, arr)
    return table.cast(arrow_schema(cfg))


def _decode_isolating(cfg: KafkaSettings, msgs: list[Any]) -> tuple[Any, list[tuple[Any, str]]]:
    """Like :func:`decode`, but the records that fail go aside with their error instead of
    failing the batch: halves of a failing batch are decoded again until the failing records
    stand alone, so a few bad records among many cost a few extra passes, not one per record."""
    import pyarrow as pa

    try:
        return decode(cfg, msgs), []
    except DecodeError as exc:
        if len(msgs) == 1:
            return arrow_schema(cfg).empty_table(), [(msgs[0], str(exc))]
    mid = len(msgs) // 2
    left, bad_left = _decode_isolating(cfg, msgs[:mid])
    right, bad_right = _decode_isolating(cfg, msgs[mid:])
    return pa.concat_tables([left, right]), bad_left + bad_right


def _dead_letters(
    cfg: KafkaSettings, bad: list[tuple[Any, str]], start: dt.datetime, end: dt.datetime
) -> Any:
    """The bad records whose record timestamp falls in [start, end), as dead-letter rows."""
    import pyarrow as pa

    lo, hi = client.to_ms(start), client.to_ms(end)
    mine = [(m, e) for m, e in bad if lo <= m.timestamp()[1] < hi]
    return pa.table(
        [
            pa.array([cfg.topic] * len(mine), pa.string()),
            pa.array([m.partition() for m, _ in mine], pa.int32()),
            pa.array([m.offset() for m, _ in mine], pa.int64()),
            pa.array([m.timestamp()[1] * 1000 for m, _ in mine], pa.int64()).cast(
                pa.timestamp("us")
            ),
            pa.array([m.key() for m, _ in mine], pa.binary()),
            pa.array([m.value() for m, _ in mine], pa.binary()),
            pa.array([e for _, e in mine], pa.string()),
        ],
        schema=dead_letter_schema(),
    )


def dead_letter_schema() -> Any:
    """The dead-letter table's columns."""
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("record_timestamp", pa.timestamp("us")),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("error", pa.string()),
        ]
    )


def _keep(cfg: KafkaSettings, table: Any, start: dt.datetime, end: dt.datetime) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    def lit(t: dt.datetime) -> Any:
        return pa.scalar(t.astimezone(dt.timezone.utc).replace(tzinfo=None), pa.timestamp("us"))

    et = table.column(cfg.time_column)
    ts = table.column("_kafka_timestamp")
    mask = pc.and_(
        pc.and_(pc.greater_equal(et, lit(start)), pc.less(et, lit(end))),
        pc.and_(
            pc.greater_equal(ts, lit(start - cfg.lateness)), pc.less(ts, lit(end + cfg.lateness))
        ),
    )
    return table.filter(pc.fill_null(mask, False))


def read_period(
    cfg: KafkaSettings,
    model: str,
    start: dt.datetime,
    end: dt.datetime,
) -> tuple[Any, dict[str, Any], DeadLetters | None]:
    """The landing rows of [start, end), the detail of what was read and, when the source has
    a dead-letter table, the period's dead letters (see module doc). RetentionError when the
    log lost records of the period since it was planned."""
    began = time.perf_counter()
    check = check_source(cfg, model, start, end)
    errors = [f for f in check.findings if f.severity == "error"]
    if errors:
        raise RetentionError("; ".join(f.message for f in errors))
    msgs, read = _consume(cfg, check.ranges, start, end)
    dead: DeadLetters | None = None
    if cfg.dead_letter is None:
        table = decode(cfg, msgs) if msgs else arrow_schema(cfg).empty_table()
    else:  # an empty set of dead letters too: it replaces the period's earlier ones
        table, bad = _decode_isolating(cfg, msgs) if msgs else (arrow_schema(cfg).empty_table(), [])
        dead = DeadLetters(cfg.dead_letter, cfg.topic, _dead_letters(cfg, bad, start, end))
    kept = _keep(cfg, table, start, end)
    counts: dict[int, int] = {}
    for p in kept.column("_kafka_partition").to_pylist():
        counts[p] = counts.get(p, 0) + 1
    detail = {
        "kafka": {
            "topic": cfg.topic,
            "bootstrap": cfg.bootstrap,
            "event_time": cfg.event_time,
            "lateness_s": cfg.lateness.total_seconds(),
            "ranges": [
                {
                    "partition": r.partition,
                    "from": r.from_offset,
                    "to": r.to_offset,
                    "read": read.get(r.partition, 0),
                    "kept": counts.get(r.partition, 0),
                }
                for r in check.ranges
            ],
        }
    }
    if dead is not None:
        detail["kafka"]["dead_letters"] = dead.rows.num_rows
    if cfg.event_time == RECORD_TIMESTAMP:
        detail["kafka"]["event_time"] = RECORD_TIMESTAMP
    log.info(
        "replay %s [%s, %s): read %d record(s), kept %d in %.2fs",
        cfg.topic,
        start,
        end,
        sum(read.values()),
        kept.num_rows,
        time.perf_counter() - began,
    )
    return kept, detail, dead
