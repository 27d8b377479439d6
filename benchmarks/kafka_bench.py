"""Replaying a period from Kafka into the raw layer, against a bare confluent-kafka consumer.

    python benchmarks/kafka_bench.py            # 1,000,000 records in the period, median of 3
    python benchmarks/kafka_bench.py --quick    # 20,000 records, once (the test suite runs it)
    python benchmarks/kafka_bench.py --json     # also one JSON line with the figures
    python benchmarks/kafka_bench.py --bootstrap 127.0.0.1:9092   # a broker you name

A throwaway broker (the tests' ``kafka_support``: KRaft, one node; or ``--bootstrap``) gets a new
3-partition topic of
JSON orders whose event times fill one day (2026-11-02), with record timestamps a little after
them. Both sides then land that day into the table ``raw_orders`` of the same DuckDB file:

- **replay**: ``Project.plan("raw_orders", day)`` + ``backfill(...).run()``: the retention check
  (earliest/latest offsets, the oldest record's time, the offset of the period's start), one
  landing task reading its offset ranges (to the log end: here the topic holds only that day),
  decoding, keeping the period's records, replacing the period in the table, fingerprinting it,
  and the ledger's bookkeeping.
- **bare**: what one writes by hand with confluent-kafka: ``offsets_for_times`` for the edges,
  ``assign()`` + ``consume()`` batches up to the end offsets, ``json.loads`` per record, the
  columns as Arrow, ``DELETE`` the day + ``INSERT ... SELECT`` with the casts, in one transaction.

Both must leave the same rows (checked). The target is replay throughput >= 0.5x the bare
consumer's (ratio = bare seconds / replay seconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import duckdb
import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic

import backfill

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from kafka_support import KafkaBroker

UTC = dt.timezone.utc
DAY = dt.datetime(2026, 11, 2, tzinfo=UTC)
PARTITIONS = 3
TOPIC = f"bench_orders_{uuid.uuid4().hex[:8]}"  # a new topic, also on a broker you name
TARGET = 0.5


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def produce(bootstrap: str, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(30)
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "log_level": 2,
        }
    )
    rnd = random.Random(11)
    day_ms = _ms(DAY)
    span = 86_400_000 - 60_000
    for i in range(n):
        ms = day_ms + i * span // n  # event times fill the day in order; keys spread them
        event = dt.datetime.fromtimestamp(ms / 1000, UTC)
        value = (
            f'{{"order_id": {i}, "customer_id": {rnd.randrange(5000)}, '
            f'"amount": {rnd.randrange(1, 2000) / 4}, '
            f'"ordered_at": "{event:%Y-%m-%dT%H:%M:%S.%f}Z"}}'
        )
        p.produce(
            TOPIC,
            value=value.encode(),
            key=str(i).encode(),
            timestamp=ms + rnd.randrange(0, 30_000),
        )
        if i % 50_000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def write_project(root: Path, bootstrap: str) -> None:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "backfill.yml").write_text(f"""
name: kbench
engine: {{type: duckdb, path: warehouse.duckdb}}
sources:
  kafka:
    orders:
      grain: day
      lands_in: raw_orders
      kafka:
        bootstrap: "{bootstrap}"
        topic: {TOPIC}
        format: json
        event_time: ordered_at
        key: order_id
        lateness: 1h
        timeout: 10
        columns: {{order_id: int, customer_id: int, amount: float, ordered_at: timestamp}}
models:
  defaults: {{grain: day, begin: "2026-10-01"}}
""")


def run_replay(root: Path) -> float:
    began = time.perf_counter()
    project = backfill.Project.load(root)
    plan = project.plan("raw_orders", DAY, DAY + dt.timedelta(days=1))
    if not plan.ok:
        raise SystemExit(str(plan.findings))
    status = project.backfill(plan, reason="bench", direct=True).run()
    if not status.ok:
        raise SystemExit(str(status))
    return time.perf_counter() - began


def run_bare(bootstrap: str, db_path: Path) -> float:
    """The hand-written consumer (see the module doc)."""
    began = time.perf_counter()
    lateness = dt.timedelta(hours=1)
    lo, hi = _ms(DAY - lateness), _ms(DAY + dt.timedelta(days=1) + lateness)
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-bare",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.max.bytes": 52428800,
            "queued.min.messages": 200000,
            "log_level": 2,
        }
    )
    parts = [ck.TopicPartition(TOPIC, p, lo) for p in range(PARTITIONS)]
    starts = {tp.partition: tp.offset for tp in c.offsets_for_times(parts, timeout=10)}
    ends = {}
    for tp in c.offsets_for_times(
        [ck.TopicPartition(TOPIC, p, hi) for p in range(PARTITIONS)], timeout=10
    ):
        ends[tp.partition] = (
            tp.offset
            if tp.offset >= 0
            else c.get_watermark_offsets(ck.TopicPartition(TOPIC, tp.partition), timeout=10)[1]
        )
    todo = {p for p in range(PARTITIONS) if ends[p] > starts[p]}
    c.assign([ck.TopicPartition(TOPIC, p, starts[p]) for p in todo])
    cols: dict[str, list[Any]] = {
        k: [] for k in ("order_id", "customer_id", "amount", "ordered_at", "p", "o", "ts")
    }
    while todo:
        for m in c.consume(num_messages=10_000, timeout=1.0):
            if m.error() is not None:
                raise SystemExit(str(m.error()))
            p, o = m.partition(), m.offset()
            if p not in todo or o >= ends[p]:
                continue
            v = json.loads(m.value())
            cols["order_id"].append(v.get("order_id"))
            cols["customer_id"].append(v.get("customer_id"))
            cols["amount"].append(v.get("amount"))
            cols["ordered_at"].append(v.get("ordered_at"))
            cols["p"].append(p)
            cols["o"].append(o)
            cols["ts"].append(m.timestamp()[1])
            if o >= ends[p] - 1:
                todo.discard(p)
    c.close()
    batch = pa.table(
        {
            "order_id": pa.array(cols["order_id"], pa.int64()),
            "customer_id": pa.array(cols["customer_id"], pa.int64()),
            "amount": pa.array(cols["amount"], pa.float64()),
            "ordered_at": pa.array(cols["ordered_at"], pa.string()),
            "p": pa.array(cols["p"], pa.int32()),
            "o": pa.array(cols["o"], pa.int64()),
            "ts": pa.array(cols["ts"], pa.int64()),
        }
    )
    start, end = DAY.replace(tzinfo=None), (DAY + dt.timedelta(days=1)).replace(tzinfo=None)
    with duckdb.connect(str(db_path)) as db:
        db.register("batch", batch)
        db.execute("BEGIN")
        db.execute("DELETE FROM raw_orders WHERE ordered_at >= ? AND ordered_at < ?", [start, end])
        db.execute(
            """INSERT INTO raw_orders BY NAME
            SELECT order_id, customer_id, amount, et AS ordered_at, p AS _kafka_partition,
                   o AS _kafka_offset, make_timestamp(ts * 1000) AS _kafka_timestamp
            FROM (SELECT *, CAST(replace(ordered_at, 'Z', '') AS TIMESTAMP) AS et FROM batch)
            WHERE et >= ? AND et < ?""",
            [start, end],
        )
        db.execute("COMMIT")
    return time.perf_counter() - began


def table_rows(db_path: Path) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db_path), read_only=True) as db:
        return db.execute(
            "SELECT order_id, customer_id, amount, ordered_at, _kafka_partition, "
            "_kafka_offset, _kafka_timestamp FROM raw_orders ORDER BY "
            "_kafka_partition, _kafka_offset"
        ).fetchall()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20,000 records, one run")
    ap.add_argument("--records", type=int, help="records in the period (default 1,000,000)")
    ap.add_argument("--repeat", type=int, help="runs per side (median; default 3)")
    ap.add_argument("--json", action="store_true", help="also print one JSON line")
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = ap.parse_args()
    n = args.records or (20_000 if args.quick else 1_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    broker = None if args.bootstrap else KafkaBroker()
    bootstrap = str(args.bootstrap) if broker is None else broker.bootstrap
    try:
        began = time.perf_counter()
        produce(bootstrap, n)
        print(
            f"produced {n:,} records to {TOPIC} ({PARTITIONS} partitions) in "
            f"{time.perf_counter() - began:.1f}s",
            flush=True,
        )
        with tempfile.TemporaryDirectory(prefix="kafka-bench-") as tmp:
            root = Path(tmp)
            write_project(root, bootstrap)
            db = root / "warehouse.duckdb"
            replay, bare = [], []
            replay.append(run_replay(root))  # creates the table (timed: it's a replay too)
            expected = table_rows(db)
            for i in range(repeat):
                bare.append(run_bare(bootstrap, db))
                same_bare = table_rows(db) == expected
                if i:
                    replay.append(run_replay(root))
                same_replay = table_rows(db) == expected
                if not (same_bare and same_replay):
                    raise SystemExit(
                        f"the tables differ: bare same={same_bare}, replay same={same_replay}"
                    )
                print(f"run {i + 1}: replay {replay[-1]:.2f}s, bare {bare[-1]:.2f}s", flush=True)
    finally:
        if broker is not None:
            broker.stop()
    r, b = statistics.median(replay), statistics.median(bare)
    ratio = b / r
    print(f"records in the period: {len(expected):,}; same rows on both sides: True")
    print(
        f"replay (plan + landing task): {r:.2f}s median of {len(replay)} "
        f"({len(expected) / r:,.0f} records/s)"
    )
    print(
        f"bare confluent-kafka consumer: {b:.2f}s median of {len(bare)} "
        f"({len(expected) / b:,.0f} records/s)"
    )
    print(
        f"ratio (replay throughput / bare): {ratio:.2f}x; target >= {TARGET}x: "
        f"{'met' if ratio >= TARGET else 'not met'}"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "records": len(expected),
                    "replay_s": r,
                    "bare_s": b,
                    "ratio": ratio,
                    "target": TARGET,
                    "met": ratio >= TARGET,
                    "identical": True,
                }
            )
        )


if __name__ == "__main__":
    main()
