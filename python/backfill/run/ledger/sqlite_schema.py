"""The SQLite ledger's tables, its schema version and the place its migrations go.

A ledger file records ``schema_version`` in its ``meta`` table. Opening a file runs, in one write
transaction: create the tables (a new file), or apply :data:`MIGRATIONS` from the file's version
up to :data:`SCHEMA_VERSION` (an older file). A file of a newer version is refused: this code
would misread it, and writing it could corrupt it for the version that made it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from .records import LedgerError
from .states import V1_BACKFILL_STATES, V3_BACKFILL_STATES, AttemptState, BackfillState, TaskState

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "V1_TABLES", "V3_COLUMNS", "prepare", "stored_version"]

#: The version this code writes and reads (every backend's: the Postgres ledger has the same
#: versions). Bump it with a migration in MIGRATIONS (and in postgres_schema.MIGRATIONS).
SCHEMA_VERSION = 6


def _v2(db: sqlite3.Connection) -> None:
    """Version 2: a partial index of the ready tasks (a claim scans only pending tasks, not the
    done ones of a long backfill) and one of lease expiries (dropping dead leases)."""
    db.execute(
        "CREATE INDEX IF NOT EXISTS tasks_ready ON tasks (backfill_id, wave, task_id) "
        "WHERE status = 'pending'"
    )
    db.execute("CREATE INDEX IF NOT EXISTS leases_expiry ON leases (backfill_id, expires_at)")


#: What version 3 adds to ``backfills``: the pause hold, the cancellation, the run options.
V3_COLUMNS = (
    "paused_at TEXT",
    "paused_by TEXT",
    "cancelled_by TEXT",
    "cancel_reason TEXT",
    "options TEXT",
)


def _v3(db: sqlite3.Connection) -> None:
    """Version 3: backfills may be ``cancelled`` (a new state in the status CHECK), paused
    (``paused_at``/``paused_by``), and carry run ``options`` (JSON: windows, budget, costs).
    SQLite cannot change a CHECK constraint in place, so the table is rebuilt (foreign keys are
    not enforced on these connections, and the other tables name ``backfills`` by name)."""
    old = [r[1] for r in db.execute("PRAGMA table_info(backfills)")]
    ddl = V1_TABLES.split("CREATE TABLE IF NOT EXISTS backfills (")[1].split(");")[0]
    ddl = ddl.replace(_values_text(V1_BACKFILL_STATES), _values_text(V3_BACKFILL_STATES)).rstrip()
    db.execute(f"CREATE TABLE backfills_v3 ({ddl},\n    " + ",\n    ".join(V3_COLUMNS) + ")")
    cols = ", ".join(f'"{c}"' for c in old)
    db.execute(f"INSERT INTO backfills_v3 ({cols}) SELECT {cols} FROM backfills")
    db.execute("DROP TABLE backfills")
    db.execute("ALTER TABLE backfills_v3 RENAME TO backfills")


def _execute_statements(db: sqlite3.Connection, sql: str) -> None:
    """Runs ``sql``'s statements one at a time. Not executescript: it would COMMIT the opening
    transaction."""
    for statement in sql.split(";\n"):
        if statement.strip():
            db.execute(statement)


def _v4(db: sqlite3.Connection) -> None:
    """Version 4: replays from Kafka (see :mod:`.replay_records`)."""
    from .replay_records import V4_SQL

    _execute_statements(db, V4_SQL)


def _v5(db: sqlite3.Connection) -> None:
    """Version 5: backfills may be ``interrupted`` (a runner stopped by SIGINT or SIGTERM
    before the end; a new state in the status CHECK). The table is rebuilt as in :func:`_v3`,
    from its stored definition with only the CHECK's list of states changed."""
    (ddl,) = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'backfills'"
    ).fetchone()
    old_check, new_check = _values_text(V3_BACKFILL_STATES), _values(BackfillState)
    if old_check not in ddl:  # pragma: no cover - every v4 file has it
        raise LedgerError("the backfills table lacks the version 4 status CHECK; cannot migrate")
    cols = ", ".join(f'"{r[1]}"' for r in db.execute("PRAGMA table_info(backfills)"))
    db.execute(ddl.replace(old_check, new_check).replace("backfills", "backfills_v5", 1))
    db.execute(f"INSERT INTO backfills_v5 ({cols}) SELECT {cols} FROM backfills")
    db.execute("DROP TABLE backfills")
    db.execute("ALTER TABLE backfills_v5 RENAME TO backfills")


def _v6(db: sqlite3.Connection) -> None:
    """Version 6: the sample runs of ``backfill estimate`` (see :mod:`.cost_records`)."""
    from .cost_records import V6_SQL

    _execute_statements(db, V6_SQL)


#: version -> the function that moves a ledger of ``version - 1`` to ``version`` (inside the
#: opening transaction). A new file is version 1's tables plus every migration, so a new and a
#: migrated ledger cannot differ.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    2: _v2,
    3: _v3,
    4: _v4,
    5: _v5,
    6: _v6,
}


def _values(states: Iterable[BackfillState | TaskState | AttemptState]) -> str:
    # The CHECK constraints list the enums' values, so the states module stays their one source.
    return _values_text(s.value for s in states)


def _values_text(values: Iterable[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


#: Version 1 of the tables (kept as it was: migrations build on it).
V1_TABLES = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS backfills (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    project_root TEXT,
    selection TEXT NOT NULL,
    exclude TEXT,
    start TEXT NOT NULL,
    end TEXT NOT NULL,
    as_of TEXT,
    reason TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('audit', 'direct')),
    engine TEXT NOT NULL,
    plan TEXT NOT NULL,
    models TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({_values_text(V1_BACKFILL_STATES)})),
    updated_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS tasks (
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    task_id INTEGER NOT NULL,
    model TEXT NOT NULL,
    start TEXT,
    end TEXT,
    label TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    wave INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({_values(TaskState)})),
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0,
    rows_written INTEGER,
    fingerprint TEXT,
    error TEXT,
    started_at TEXT,
    finished_at TEXT,
    PRIMARY KEY (backfill_id, task_id)
);
CREATE INDEX IF NOT EXISTS tasks_status ON tasks (backfill_id, status, wave);
CREATE TABLE IF NOT EXISTS task_deps (
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    dep_id INTEGER NOT NULL,
    PRIMARY KEY (backfill_id, task_id, dep_id)
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    worker TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({_values(AttemptState)})),
    started_at TEXT NOT NULL,
    finished_at TEXT,
    seconds REAL,
    rows_written INTEGER,
    rows_deleted INTEGER,
    fingerprint TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS attempts_task ON attempts (backfill_id, task_id);
CREATE TABLE IF NOT EXISTS leases (
    backfill_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    worker TEXT NOT NULL,
    attempt_id INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (backfill_id, task_id)
);
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    model TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    passed INTEGER NOT NULL,
    published_fingerprints TEXT,
    result TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS publications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backfill_id TEXT NOT NULL REFERENCES backfills(id),
    published_at TEXT NOT NULL,
    published_by TEXT NOT NULL,
    note TEXT,
    forced_reason TEXT,
    models TEXT NOT NULL
)
"""


def stored_version(db: sqlite3.Connection, path: Path) -> int | None:
    """The file's schema version; None for a new (empty) file."""
    if (
        db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        is None
    ):
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    text = str(row[0])
    if not text.isdigit():
        raise LedgerError(
            f"ledger {path}: schema_version {text!r} is not a version number; "
            "is this a backfill ledger?"
        )
    return int(text)


def prepare(db: sqlite3.Connection, path: Path) -> None:
    """Creates or migrates the tables of the ledger at ``path``; call inside a write
    transaction so that concurrent openers do it once."""
    version = stored_version(db, path)
    if version is not None and version > SCHEMA_VERSION:
        raise LedgerError(
            f"ledger {path} has schema version {version}, newer than the version "
            f"{SCHEMA_VERSION} this backfill supports: a newer backfill wrote it. "
            "Upgrade backfill (pip install -U backfill) to use it; it was left "
            "unchanged"
        )
    if version is None:
        for statement in V1_TABLES.split(";"):  # no ';' inside a statement
            db.execute(statement)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', '1')")
        version = 1
    for target in range(version + 1, SCHEMA_VERSION + 1):
        migrate = MIGRATIONS.get(target)
        if migrate is None:
            raise LedgerError(
                f"ledger {path} has schema version {version}; no migration to "
                f"version {target} exists (supported: {SCHEMA_VERSION})"
            )
        migrate(db)
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(target),))
