"""The ledger backends the conformance suite runs on, and helpers its modules share.

A new backend is one more entry in :data:`BACKENDS`: how to get a fresh, empty ledger URL for one
test, how to make that ledger look written by a newer schema version or by version 1, and how to
read its stored version. The fixtures that hand these to tests are in conftest.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backfill.run.ledger import SCHEMA_VERSION, BackfillState, LedgerBackend


# -- the backends under test -------------------------------------------------------------------
@dataclass(frozen=True)
class Backend:
    url: Callable[[Path, pytest.FixtureRequest], str]  # a fresh, empty ledger for one test
    make_newer: Callable[[str], None]  # mark that ledger as written by a newer schema version
    make_v1: Callable[[str], None]  # write a version-1 ledger with backfill b1 (tasks 0, 1 done)
    version: Callable[[str], int]  # the ledger's stored schema version


def _sqlite_make_newer(url: str) -> None:
    # Test-side only: stands in for a newer backfill having written the file.
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    db.close()  # `with` commits; it does not close
    db.close()


def _postgres_url(tmp: Path, request: pytest.FixtureRequest) -> str:
    # A fresh database per test on the session's throwaway server.
    return str(request.getfixturevalue("pg_server").create_database("ledger"))


def _postgres_make_newer(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "UPDATE backfill_ledger.meta SET value = %s WHERE key = 'schema_version'",
            (str(SCHEMA_VERSION + 1),),
        )


# Version 1 rows, written by hand as a version-1 backfill wrote them (test-side only).
V1_ROWS = [
    "INSERT INTO backfills VALUES ('b1', 'p', NULL, 'm+', NULL, '2026-01-01', '2026-02-01', NULL, "
    "'v1', 'audit', 'none', '{}', '{}', 'me', '2026-01-01T00:00:00.000+00:00', 'running', "
    "'2026-01-01T00:00:00.000+00:00', NULL)",
    'INSERT INTO tasks (backfill_id, task_id, model, start, "end", label, partitions, wave, '
    "status, attempts) VALUES ('b1', 0, 'm', '2026-01-01T00:00:00+00:00', "
    "'2026-01-02T00:00:00+00:00', 'p0', 1, 0, 'done', 1), ('b1', 1, 'm', NULL, NULL, 'p1', 1, "
    "1, 'pending', 0)",
    "INSERT INTO task_deps VALUES ('b1', 1, 0)",
    "INSERT INTO attempts (backfill_id, task_id, attempt, worker, status, started_at, "
    "finished_at) VALUES ('b1', 0, 1, 'old:1:w', 'done', '2026-01-01T00:00:01.000+00:00', "
    "'2026-01-01T00:00:02.000+00:00')",
    "INSERT INTO meta VALUES ('schema_version', '1')",
]


def _sqlite_make_v1(url: str) -> None:
    from backfill.run.ledger.schema import SQLITE, v1_statements

    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.executescript(";".join([*v1_statements(SQLITE), *V1_ROWS]))
    db.close()


def _sqlite_version(url: str) -> int:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    db.close()
    return int(value)


def _postgres_make_v1(url: str) -> None:
    import psycopg

    from backfill.run.ledger.schema import POSTGRES, v1_statements

    with psycopg.connect(url, autocommit=True) as db, db.transaction():
        db.execute("CREATE SCHEMA backfill_ledger; SET search_path = backfill_ledger")
        for statement in [*v1_statements(POSTGRES), *V1_ROWS]:
            db.execute(statement.encode())


def _postgres_version(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as db:
        row = db.execute(
            "SELECT value FROM backfill_ledger.meta WHERE key = 'schema_version'"
        ).fetchone()
    assert row is not None
    return int(row[0])


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend(
        url=lambda tmp, _: f"sqlite:///{tmp / 'ledger.sqlite'}",
        make_newer=_sqlite_make_newer,
        make_v1=_sqlite_make_v1,
        version=_sqlite_version,
    ),
    "postgres": Backend(
        url=_postgres_url,
        make_newer=_postgres_make_newer,
        make_v1=_postgres_make_v1,
        version=_postgres_version,
    ),
}


def make_done(led: LedgerBackend, bid: str) -> None:
    led.set_status(bid, BackfillState.RUNNING)
    led.set_status(bid, BackfillState.DONE, finished=True)


def publication(pid: str = "pub_1") -> dict[str, Any]:
    return {
        "publication_id": pid,
        "published_at": "2026-02-02T00:00:00+00:00",
        "published_by": "me",
        "note": "fixed",
        "forced_reason": None,
        "models": {"m": ["p0"]},
    }
