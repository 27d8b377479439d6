"""Ledger files written by earlier code open, migrate and read back.

The fixtures in ``fixtures/`` were written by the ledger code of main at 63801f5, before the
ledger's tables and migrations were defined once (``fixtures/make_ledger_fixtures.py``, run
against that code): a version 6 file with one of every record, and a version 1 file as version 1
wrote it. Each is copied, opened with today's code, and read back through the typed records.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
from backfill.run.ledger import (
    SCHEMA_VERSION,
    AttemptState,
    BackfillState,
    SqliteLedger,
    TaskState,
    open_ledger,
)
from backfill.run.ledger.schema import table_names

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _copy(name: str, tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite"
    shutil.copy(FIXTURES / name, path)
    return path


def _version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    finally:
        db.close()
    return int(value)


def _columns(path: Path) -> dict[str, list[str]]:
    db = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'sqlite_sequence' "
                "ORDER BY name"
            )
        ]
        return {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        db.close()


def test_a_version_6_file_of_main_opens_and_reads_back(tmp_path: Path) -> None:
    path = _copy("ledger_v6_main.sqlite", tmp_path)
    ledger = open_ledger(f"sqlite:///{path}")
    try:
        assert isinstance(ledger, SqliteLedger) and _version(path) == SCHEMA_VERSION
        rec = ledger.backfill("bf_fixture")
        assert rec.status is BackfillState.PUBLISHED and rec.reason == "fixture"
        assert rec.options == {"budget": 5} and rec.models == {"fct": "hash1"}
        assert rec.finished_at is not None and rec.paused_at is None
        tasks = ledger.tasks("bf_fixture")
        assert [(t.status, t.rows_written, t.fingerprint, t.depends_on) for t in tasks] == [
            (TaskState.DONE, 10, TaskFingerprint(PartitionFingerprint.of(10, 0xABCD)), ()),
            (TaskState.DONE, 12, TaskFingerprint(PartitionFingerprint.of(12, 0xEF01)), (0,)),
        ]
        attempts = ledger.attempts("bf_fixture")
        assert [(a.status, a.seconds) for a in attempts] == [
            (AttemptState.DONE, 1.5),
            (AttemptState.DONE, 2.0),
        ]
        assert attempts[1].detail == {"topic": "t", "offsets": {"0": [0, 5]}}
        (audit,) = ledger.audits("bf_fixture")
        assert audit.passed and audit.audit_id == "au_1"
        # read as values (that version's fixture wrote short digests: the same numbers)
        assert audit.published_fingerprints == {"2026-08-01": PartitionFingerprint.of(9, 0xAAAA)}
        (pub,) = ledger.publications("bf_fixture")
        assert (pub.publication_id, pub.models) == ("pub_1", {"fct": ["2026-08-01"]})
        (reset,) = ledger.offset_resets("g")
        assert (reset.target, reset.offsets_old, reset.offsets_new) == ("earliest", {0: 5}, {0: 0})
        history = ledger.cost_history("shop", ["fct"])
        assert [(h.source, h.partitions, h.sql_hash) for h in history] == [
            ("run", 1, "hash1"),
            ("run", 1, "hash1"),
            ("sample", 1, "hash1"),
        ]
        # and it is written to as before
        ledger.create_backfill({**_record("bf_new")}, [])
        assert ledger.latest() == "bf_new"
    finally:
        ledger.close()


def _record(bid: str) -> dict[str, object]:
    return {
        "id": bid,
        "project": "shop",
        "project_root": None,
        "selection": "fct",
        "exclude": None,
        "start": "2026-09-01",
        "end": "2026-09-02",
        "as_of": None,
        "reason": "after",
        "mode": "audit",
        "engine": "duckdb",
        "plan": "{}",
        "models": "{}",
        "created_by": "me",
    }


def test_a_version_1_file_of_main_migrates_and_reads_back(tmp_path: Path) -> None:
    path = _copy("ledger_v1_main.sqlite", tmp_path)
    assert _version(path) == 1
    ledger = SqliteLedger(path)
    try:
        assert _version(path) == SCHEMA_VERSION
        rec = ledger.backfill("b1")
        assert rec.status is BackfillState.RUNNING and rec.options == {}
        beef = TaskFingerprint(PartitionFingerprint.of(4, 0xBEEF))
        assert [(t.status, t.fingerprint) for t in ledger.tasks("b1")] == [
            (TaskState.DONE, beef),
            (TaskState.PENDING, None),
        ]
        (attempt,) = ledger.attempts("b1")
        assert attempt.detail is None and attempt.fingerprint == beef
        assert str(attempt.fingerprint) == "4:000000000000beef"
        # the states later versions added are allowed now
        ledger.set_status("b1", BackfillState.INTERRUPTED)
        ledger.cancel("b1", "migrated", "me")
        assert ledger.backfill("b1").status is BackfillState.CANCELLED
    finally:
        ledger.close()


@pytest.mark.parametrize("name", ["ledger_v1_main.sqlite", "ledger_v6_main.sqlite"])
def test_a_migrated_file_has_the_tables_of_a_new_one(name: str, tmp_path: Path) -> None:
    old = _copy(name, tmp_path)
    SqliteLedger(old).close()
    new = tmp_path / "new.sqlite"
    SqliteLedger(new).close()
    assert _columns(old) == _columns(new)
    assert set(_columns(new)) == set(table_names("sqlite"))


def test_ledger_is_the_documented_alias_of_the_sqlite_backend() -> None:
    import backfill

    assert backfill.Ledger is SqliteLedger  # public API since the first release
