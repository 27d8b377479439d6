"""The Postgres ledger's tables, its schema version and its migrations.

The ledger lives in one schema of the database (``backfill_ledger`` unless the URL says
``?schema=``). Its ``meta`` table records ``schema_version``. Opening a ledger runs, in one
transaction holding an advisory lock (so that workers starting together on many hosts create or
migrate it once): create the tables (a new ledger), or apply :data:`MIGRATIONS` from the stored
version up to :data:`SCHEMA_VERSION` (an older ledger). A ledger of a newer version is refused.

Timestamps users read (``created_at``, ``started_at``...) are ISO 8601 text, as in the SQLite
ledger, stamped from the DATABASE clock (:data:`NOW`); lease expiries are ``timestamptz`` compared
with ``clock_timestamp()``, so workers on hosts with skewed clocks agree on who holds a lease.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import psycopg

from .records import LedgerError
from .sqlite_schema import SCHEMA_VERSION, V3_COLUMNS
from .states import V1_BACKFILL_STATES, V3_BACKFILL_STATES, AttemptState, BackfillState, TaskState

__all__ = ["MIGRATIONS", "NOW", "SCHEMA_VERSION", "V1_TABLES", "prepare"]

#: The database's clock as the ledger's stamps (ISO 8601 UTC with milliseconds, like utcnow()).
NOW = "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"+00:00\"')"

# Any 64-bit key; it only has to be the same for every backfill process.
_LOCK_KEY = 0x6266_6C65_6467  # "bfledg"


def _values(states: Iterable[BackfillState | TaskState | AttemptState]) -> str:
    # The CHECK constraints list the enums' values, so the states module stays their one source.
    return ", ".join(f"'{s.value}'" for s in states)


#: Version 1 of the tables (kept verbatim: a new ledger is v1 plus every migration, so a new and
#: a migrated ledger cannot differ).
V1_TABLES = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE backfills (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    project_root TEXT,
    selection TEXT NOT NULL,
    exclude TEXT,
    start TEXT NOT NULL,
    "end" TEXT NOT NULL,
    as_of TEXT,
    reason TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('audit', 'direct')),
    engine TEXT NOT NULL,
    plan TEXT NOT NULL,
    models TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({", ".join(f"'{v}'" for v in V1_BACKFILL_STATES)})),
    updated_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE tasks (
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    task_id INTEGER NOT NULL,
    model TEXT NOT NULL,
    start TEXT,
    "end" TEXT,
    label TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    wave INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({_values(TaskState)})),
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before DOUBLE PRECISION NOT NULL DEFAULT 0,
    rows_written BIGINT,
    fingerprint TEXT,
    error TEXT,
    started_at TEXT,
    finished_at TEXT,
    PRIMARY KEY (backfill_id, task_id)
);
CREATE INDEX tasks_status ON tasks (backfill_id, status, wave);
CREATE TABLE task_deps (
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    dep_id INTEGER NOT NULL,
    PRIMARY KEY (backfill_id, task_id, dep_id)
);
CREATE TABLE attempts (
    id BIGSERIAL PRIMARY KEY,
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    worker TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({_values(AttemptState)})),
    started_at TEXT NOT NULL,
    finished_at TEXT,
    seconds DOUBLE PRECISION,
    rows_written BIGINT,
    rows_deleted BIGINT,
    fingerprint TEXT,
    error TEXT
);
CREATE INDEX attempts_task ON attempts (backfill_id, task_id);
CREATE TABLE leases (
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    worker TEXT NOT NULL,
    attempt_id BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (backfill_id, task_id)
);
CREATE TABLE audits (
    id BIGSERIAL PRIMARY KEY,
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    model TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    passed INTEGER NOT NULL,
    published_fingerprints TEXT,
    result TEXT NOT NULL
);
CREATE TABLE publications (
    id BIGSERIAL PRIMARY KEY,
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    published_at TEXT NOT NULL,
    published_by TEXT NOT NULL,
    note TEXT,
    forced_reason TEXT,
    models TEXT NOT NULL
)
"""

_V2 = """
CREATE INDEX tasks_ready ON tasks (backfill_id, wave, task_id) WHERE status = 'pending';
DROP INDEX tasks_status;
ALTER TABLE leases ADD COLUMN claim_token TEXT;
CREATE FUNCTION ledger_fail(message TEXT) RETURNS INTEGER LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = message; END $$
"""


def _run(db: psycopg.Connection[tuple[object, ...]], script: str) -> None:
    for statement in script.split(";\n"):  # no ';' + newline inside a statement
        if statement.strip():
            db.execute(statement.encode())


def _v2(db: psycopg.Connection[tuple[object, ...]]) -> None:
    """Version 2: a partial index of the ready tasks instead of the index of every status (a
    claim scans only ready tasks; every status change maintained the other one for nothing),
    the claim token (a claim whose COMMIT's outcome was unknown is found again by its retry;
    no index: leases holds only the tasks in flight) and ``ledger_fail`` (a guarded statement
    aborts itself when a check fails)."""
    _run(db, _V2)


def _v3(db: psycopg.Connection[tuple[object, ...]]) -> None:
    """Version 3: backfills may be ``cancelled`` (the status CHECK gains it), paused
    (``paused_at``/``paused_by``) and carry run ``options`` (JSON: windows, budget, costs)."""
    _run(
        db,
        f"""
ALTER TABLE backfills DROP CONSTRAINT backfills_status_check;
ALTER TABLE backfills ADD CONSTRAINT backfills_status_check
    CHECK (status IN ({", ".join(f"'{v}'" for v in V3_BACKFILL_STATES)}));
ALTER TABLE backfills {", ".join(f"ADD COLUMN {c}" for c in V3_COLUMNS)}""",
    )


#: version -> the function moving a ledger of ``version - 1`` to ``version`` (inside the opening
#: transaction).
def _v4(db: psycopg.Connection[tuple[object, ...]]) -> None:
    """Version 4: replays from Kafka (see :mod:`.replay_records`)."""
    from .replay_records import V4_SQL

    _run(db, V4_SQL)


def _v5(db: psycopg.Connection[tuple[object, ...]]) -> None:
    """Version 5: backfills may be ``interrupted`` (a runner stopped by SIGINT or SIGTERM
    before the end): the status CHECK gains it."""
    _run(
        db,
        f"""
ALTER TABLE backfills DROP CONSTRAINT backfills_status_check;
ALTER TABLE backfills ADD CONSTRAINT backfills_status_check
    CHECK (status IN ({_values(BackfillState)}))""",
    )


def _v6(db: psycopg.Connection[tuple[object, ...]]) -> None:
    """Version 6: the sample runs of ``backfill estimate`` (see :mod:`.cost_records`)."""
    from .cost_records import V6_SQL

    _run(db, V6_SQL)


MIGRATIONS: dict[int, Callable[[psycopg.Connection[tuple[object, ...]]], None]] = {
    2: _v2,
    3: _v3,
    4: _v4,
    5: _v5,
    6: _v6,
}


def stored_version(
    db: psycopg.Connection[tuple[object, ...]], schema: str, where: str
) -> int | None:
    """The ledger's schema version; None when the schema has no ledger yet."""
    found = db.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'meta'", (schema,)
    ).fetchone()
    if found is None:
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    text = str(row[0])
    if not text.isdigit():
        raise LedgerError(
            f"ledger {where}: schema_version {text!r} is not a version number; "
            f"is schema {schema!r} a backfill ledger?"
        )
    return int(text)


def prepare(db: psycopg.Connection[tuple[object, ...]], schema: str, where: str) -> None:
    """Creates or migrates the ledger's tables in ``schema``. Call inside a transaction on a
    connection whose search_path is ``schema``; the advisory lock (released at its end) makes
    concurrent openers wait for the first one."""
    db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
    db.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'.encode())
    version = stored_version(db, schema, where)
    if version is not None and version > SCHEMA_VERSION:
        raise LedgerError(
            f"ledger {where} has schema version {version}, newer than the version "
            f"{SCHEMA_VERSION} this backfill supports: a newer backfill wrote it. "
            "Upgrade backfill (pip install -U backfill) to use it; it was left "
            "unchanged"
        )
    if version is None:
        _run(db, V1_TABLES)
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        version = 1
    for target in range(version + 1, SCHEMA_VERSION + 1):
        migrate = MIGRATIONS.get(target)
        if migrate is None:
            raise LedgerError(
                f"ledger {where} has schema version {version}; no migration to "
                f"version {target} exists (supported: {SCHEMA_VERSION})"
            )
        migrate(db)
        db.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(target),))
