"""Shared pytest configuration and fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from notify_support import Mailbox, Receiver, http_receiver, smtp_receiver

# CI runs are reproducible (derandomized); local runs explore new examples each time.
settings.register_profile(
    "backfill",
    deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("backfill")

# `make test` runs pytest on both cores (pytest-xdist, --dist loadgroup). A test that needs one
# of these expensive session fixtures runs in the same worker as the others needing it, so each
# is made once per run: one SparkSession, one Kafka broker, one dbt build.
_GROUPS = {"built_spark_shop": "spark", "kafka_broker": "kafka", "built_dbt_shop": "dbt"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Marks each test as it is collected (before any collection_modifyitems hook, where xdist
    reads the groups)."""
    names = getattr(item, "fixturenames", ())
    group = next((g for f, g in _GROUPS.items() if f in names), None)
    if "spark" in item.nodeid.lower():
        group = "spark"  # also the tests that start Spark themselves: one session
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def built_shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shop example built once for the session (with the bug). Read it, or copy it with
    shop_support.copy_built before writing."""
    from backfill.examples import shop
    from shop_support import build

    root = shop.create(tmp_path_factory.mktemp("built") / "shop", orders_per_day=12)
    build(root)
    return root


@pytest.fixture(scope="session")
def built_dbt_shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dbt shop (small: 2026-07-20..2026-08-20, with the bug) built once by dbt for the
    session. Copy it with shutil.copytree before writing."""
    from backfill.examples import dbt_shop
    from dbt_support import FIRST, LAST, build

    root = dbt_shop.create(
        tmp_path_factory.mktemp("dbt") / "dbt_shop", orders_per_day=12, first=FIRST, last=LAST
    )
    build(root)
    return root


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One throwaway PostgreSQL cluster for the whole session (see pg_support); each test makes
    its own database with ``pg_server.create_database()``."""
    from pg_support import PgServer

    server = PgServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def built_pg_shop(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The shop (small, with the bug) built once for the session in a database of the
    throwaway server; ``built_pg_shop.copy(dest)`` gives a test its own database and project."""
    from pg_engine_support import build_pg_shop

    return build_pg_shop(pg_server, tmp_path_factory.mktemp("pg_shop"))


@pytest.fixture(scope="session")
def built_pg_partitioned_shop(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same shop with its models' tables declaratively partitioned
    (``pg_engine_support.TABLE_PARTITIONS``), built once for the session."""
    from pg_engine_support import TABLE_PARTITIONS, build_pg_shop

    return build_pg_shop(
        pg_server, tmp_path_factory.mktemp("pg_parts_shop"), table_partitions=TABLE_PARTITIONS
    )


@pytest.fixture(scope="session")
def built_spark_shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shop on Spark + Iceberg (July and August 2026, with the bug), built once in the
    session's one SparkSession; ``spark_support.copy_built`` gives a test its own project over
    these tables, put back as built."""
    import spark_support

    root = spark_support.create(tmp_path_factory.mktemp("spark") / "shop")
    spark_support.build(root)
    spark_support.record(root)
    return root


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Any]:
    """One throwaway Kafka broker (KRaft) for the whole session (see kafka_support)."""
    pytest.importorskip("confluent_kafka")
    from kafka_support import KafkaBroker

    broker = KafkaBroker()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def web() -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1 for one test module (notify_support)."""
    yield from http_receiver()


@pytest.fixture(scope="module")
def mail() -> Iterator[Mailbox]:
    """An SMTP server on 127.0.0.1 for one test module (notify_support)."""
    yield from smtp_receiver()
