"""Fixtures of the ledger conformance suite: one ledger per test on every backend of
:data:`ledger_cases.BACKENDS`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
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
