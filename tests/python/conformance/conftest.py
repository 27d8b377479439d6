"""Fixtures of the conformance suites: one ledger per test on every backend of
:data:`ledger_cases.BACKENDS`, and one copy of the shop per test on every engine of
:data:`engine_cases.ENGINES`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_cases import ENGINES, Case, make_case
from ledger_cases import BACKENDS, Backend

from backfill.run.ledger import LedgerBackend, open_ledger


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@pytest.fixture
def url(backend: Backend, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return backend.url(tmp_path, request)


@pytest.fixture
def ledger(url: str) -> Iterator[LedgerBackend]:
    led = open_ledger(url)
    yield led
    led.close()


@pytest.fixture(params=ENGINES)
def case(
    request: pytest.FixtureRequest, built_shop: Path, built_dbt_shop: Path, tmp_path: Path
) -> Iterator[Case]:
    pg = (
        request.getfixturevalue("built_pg_shop")
        if request.param == "postgres"
        else request.getfixturevalue("built_pg_partitioned_shop")
        if request.param == "postgres-partitioned"
        else None
    )
    spark_shop = request.getfixturevalue("built_spark_shop") if request.param == "spark" else None
    c = make_case(request.param, built_shop, built_dbt_shop, tmp_path, pg, spark_shop)
    yield c
    c.engine.close()
