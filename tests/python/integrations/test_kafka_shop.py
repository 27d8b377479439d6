"""The shop example with its orders in a Kafka topic: the generated orders are produced to the
topic (out of order, late within the lateness), the project variant replays a period into
raw_orders and everything downstream in one plan, and the landed rows are exactly the generated
orders of the period (the generator's raw.orders table is the oracle)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

import duckdb

import backfill
from backfill.examples import shop
from backfill.examples.shop import kafka as shop_kafka

START, END = dt.date(2026, 8, 2), dt.date(2026, 8, 5)


def test_shop_orders_topic_replays_a_period_into_raw_and_downstream(
    kafka_broker: Any, tmp_path: Path
) -> None:
    root = shop.create(tmp_path / "shop", data=False)
    db = root / "warehouse.duckdb"
    shop.generate(db, orders_per_day=30, first=dt.date(2026, 8, 1), last=dt.date(2026, 8, 6))
    produced = shop_kafka.produce_orders(db, kafka_broker.bootstrap, topic="shop_orders")
    shop_kafka.use_kafka(root, kafka_broker.bootstrap, topic="shop_orders")
    project = backfill.Project.load(root)
    assert 'ref("raw_orders")' in (root / "models" / "clean_orders.sql").read_text()

    items = project.plan("clean_order_items", START, END)
    assert project.backfill(items, reason="items", direct=True).run().ok
    plan = project.plan("source:raw.orders+", START, END)
    assert plan.ok, plan.findings
    models = [m.model for m in plan.models]
    assert models[:2] == ["raw_orders", "clean_orders"] and "fct_daily_sales" in models
    assert "shop_orders" in plan.describe()
    status = project.backfill(plan, reason="replay orders", direct=True).run(concurrency=2)
    assert status.ok, status

    with duckdb.connect(str(db), read_only=True) as con:
        cols = "order_id, customer_id, ordered_at, country, status"
        period = f"ordered_at >= DATE '{START}' AND ordered_at < DATE '{END}'"
        expected = set(con.execute(f"SELECT {cols} FROM raw.orders WHERE {period}").fetchall())
        landed = con.execute(f"SELECT {cols} FROM raw_orders").fetchall()
        clean = con.execute("SELECT count(*) FROM clean_orders").fetchone()
        real = con.execute(
            f"SELECT count(*) FROM raw.orders WHERE {period} AND status <> 'TEST'"
        ).fetchone()
        dead = con.execute("SELECT count(*) FROM raw_orders_dead_letter").fetchone()
        days = con.execute("SELECT count(*) FROM fct_daily_sales").fetchone()
    assert produced > len(expected) > 50
    assert len(landed) == len(expected) and set(landed) == expected
    assert clean == real and dead == (0,) and days == ((END - START).days,)
