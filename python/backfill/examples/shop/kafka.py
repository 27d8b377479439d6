"""The shop with its orders in a Kafka topic: the checkout's stream, and the project variant
that lands it.

>>> from backfill.examples import shop
>>> from backfill.examples.shop import kafka
>>> root = shop.create("/tmp/shop_k")                                   # doctest: +SKIP
>>> kafka.produce_orders(root / "warehouse.duckdb", "127.0.0.1:9092")  # doctest: +SKIP
>>> kafka.use_kafka(root, "127.0.0.1:9092")                            # doctest: +SKIP

:func:`produce_orders` sends the generated ``raw.orders`` rows to the topic as JSON keyed by
``order_id``, in the order the checkout would: by arrival time, which is the order time plus a
delay (deterministic, like the generator: most within seconds, one in ten up to an hour late),
so order times arrive out of order and late within the project's 2h lateness. Replaying a period
therefore lands exactly that period's generated orders in ``raw_orders``. :func:`use_kafka`
switches a created shop to ``backfill.kafka.yml`` (the orders source from the topic) and points
clean_orders at the landing table.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

from . import PROJECT_DIR

__all__ = ["TOPIC", "produce_orders", "use_kafka"]

TOPIC = "orders"

# The delay of an order's record after its order time, in seconds (integer arithmetic: same
# stream everywhere): mostly seconds, every tenth order 10-60 minutes late.
_DELAYS = """
SELECT order_id, customer_id, ordered_at, country, status,
       ordered_at + to_seconds(CASE WHEN order_id % 10 = 3 THEN 600 + (order_id * 7919) % 3000
                                    ELSE (order_id * 31) % 40 END) AS arrived_at
FROM raw.orders ORDER BY arrived_at, order_id
"""


def produce_orders(
    database: str | Path,
    bootstrap: str,
    *,
    topic: str = TOPIC,
    partitions: int = 3,
    timeout: float = 30.0,
) -> int:
    """Creates ``topic`` (when missing) and produces every row of ``raw.orders`` of the DuckDB
    file ``database`` to it; returns how many. Needs confluent-kafka (``backfill[kafka]``)."""
    import importlib

    import confluent_kafka as ck  # type: ignore[import-untyped, unused-ignore]
    import duckdb

    # Typed Any: confluent_kafka.admin does not re-export NewTopic for mypy.
    kadmin: Any = importlib.import_module("confluent_kafka.admin")
    admin = kadmin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    if topic not in admin.list_topics(timeout=timeout).topics:
        for f in admin.create_topics([kadmin.NewTopic(topic, partitions, 1)]).values():
            f.result(timeout)
    con = duckdb.connect(str(database), read_only=True)
    try:
        rows = con.execute(_DELAYS).fetchall()
    finally:
        con.close()
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "log_level": 2,
            "queue.buffering.max.messages": max(100_000, 2 * len(rows)),
        }
    )
    failed: list[Any] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    utc = dt.timezone.utc
    for order_id, customer_id, ordered_at, country, status, arrived_at in rows:
        value = {
            "order_id": order_id,
            "customer_id": customer_id,
            "ordered_at": ordered_at.isoformat() + "Z",
            "country": country,
            "status": status,
        }
        producer.produce(
            topic,
            key=str(order_id).encode(),
            value=json.dumps(value).encode(),
            timestamp=int(arrived_at.replace(tzinfo=utc).timestamp() * 1000),
            on_delivery=done,
        )
        producer.poll(0)
    left = producer.flush(timeout)
    if left or failed:
        raise RuntimeError(
            f"producing to {topic} on {bootstrap}: {left} record(s) not "
            f"delivered, {len(failed)} failed ({failed[:1]})"
        )
    return len(rows)


def use_kafka(directory: str | Path, bootstrap: str, *, topic: str = TOPIC) -> Path:
    """Switches a created shop to its orders from ``topic`` on ``bootstrap``: writes
    ``backfill.kafka.yml`` as its ``backfill.yml`` and has clean_orders read the landing table
    ``raw_orders``. Returns the project directory."""
    root = Path(directory)
    text = (PROJECT_DIR / "backfill.kafka.yml").read_text(encoding="utf-8")
    text = text.replace('bootstrap: "127.0.0.1:9092"', f'bootstrap: "{bootstrap}"')
    text = re.sub(r"(?m)^(\s+topic:) orders$", rf"\1 {topic}", text)
    (root / "backfill.yml").write_text(text, encoding="utf-8")
    model = root / "models" / "clean_orders.sql"
    model.write_text(
        model.read_text(encoding="utf-8").replace('source("raw", "orders")', 'ref("raw_orders")'),
        encoding="utf-8",
    )
    return root
