"""What the ledger keeps about replays from Kafka (schema version 4), for both backends: the log
positions each attempt of a landing task read (``attempts.detail``, JSON) and every consumer
group offset reset with the offsets it replaced (``offset_resets``), so that an audit can say
which log positions produced which raw rows and a reset can be undone.

The statements are the same in SQLite and Postgres but for the placeholder; each backend mixes
in its class and provides the transaction it runs them in.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import NotFoundError
from .records import LedgerError, require_keys

__all__ = ["OFFSET_RESET_KEYS", "V4_SQL", "PostgresReplayRecords", "SqliteReplayRecords"]

#: The columns of one offset reset (``offsets_old``/``offsets_new``: JSON partition -> offset;
#: ``undoes``: the reset_id this one restored, or None).
OFFSET_RESET_KEYS = (
    "reset_id",
    "group_id",
    "topic",
    "created_at",
    "created_by",
    "target",
    "offsets_old",
    "offsets_new",
    "undoes",
)

V4_SQL = """
ALTER TABLE attempts ADD COLUMN detail TEXT;
CREATE TABLE IF NOT EXISTS offset_resets (
    reset_id TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    target TEXT NOT NULL,
    offsets_old TEXT NOT NULL,
    offsets_new TEXT NOT NULL,
    undoes TEXT
);
CREATE INDEX IF NOT EXISTS offset_resets_group ON offset_resets (group_id, topic, created_at)
"""

_DETAIL = "UPDATE attempts SET detail = {p} WHERE backfill_id = {p} AND id = {p}"
_INSERT = (
    f"INSERT INTO offset_resets ({', '.join(OFFSET_RESET_KEYS)}) VALUES "
    f"({', '.join(['{p}'] * len(OFFSET_RESET_KEYS))}) ON CONFLICT (reset_id) DO NOTHING"
)
# The cast types the parameter: Postgres cannot infer the type of a bare ``$2 IS NULL``.
_SELECT = (
    "SELECT * FROM offset_resets WHERE group_id = {p} AND "
    "(CAST({p} AS TEXT) IS NULL OR topic = {p}) ORDER BY created_at, reset_id"
)


class _ReplayRecords:
    _placeholder = "?"

    def _write(self, sql: str, params: tuple[Any, ...], what: str) -> int:
        """Runs one statement in a transaction; the number of rows it changed."""
        raise NotImplementedError

    def _read(self, sql: str, params: tuple[Any, ...], what: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def record_attempt_detail(self, backfill_id: str, attempt_id: int, detail: str) -> None:
        """Keeps ``detail`` (JSON text: what a landing attempt read) with the attempt (a later
        call replaces it); NotFoundError when the backfill has no such attempt."""
        changed = self._write(
            _DETAIL.format(p=self._placeholder),
            (detail, backfill_id, attempt_id),
            "recording an attempt's detail",
        )
        if not changed:
            raise NotFoundError(f"backfill {backfill_id!r} has no attempt {attempt_id}")

    def record_offset_reset(self, record: Mapping[str, Any]) -> None:
        """Records one consumer group offset reset (:data:`OFFSET_RESET_KEYS`); recording the
        same ``reset_id`` again changes nothing."""
        require_keys(record, OFFSET_RESET_KEYS, "offset reset")
        self._write(
            _INSERT.format(p=self._placeholder),
            tuple(record[k] for k in OFFSET_RESET_KEYS),
            "recording an offset reset",
        )

    def offset_resets(self, group: str, topic: str | None = None) -> list[dict[str, Any]]:
        """The group's offset resets (of one topic, or all), oldest first."""
        return self._read(
            _SELECT.format(p=self._placeholder), (group, topic, topic), "reading offset resets"
        )


class SqliteReplayRecords(_ReplayRecords):
    path: Any
    _tx: Callable[[], contextlib.AbstractContextManager[Any]]
    _conn: Callable[[], Any]
    _row_dict: Callable[[str, tuple[Any, ...]], dict[str, Any]]

    def _write(self, sql: str, params: tuple[Any, ...], what: str) -> int:
        try:
            with self._tx() as db:
                return int(db.execute(sql, params).rowcount)
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path}: {what} failed: {exc}") from exc

    def _read(self, sql: str, params: tuple[Any, ...], what: str) -> list[dict[str, Any]]:
        try:
            rows = self._conn().execute(sql, params).fetchall()
            return [self._row_dict("offset_resets", r) for r in rows]
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path}: {what} failed: {exc}") from exc


class PostgresReplayRecords(_ReplayRecords):
    _placeholder = "%s"
    _do: Callable[..., Any]
    _dicts: Callable[..., list[dict[str, Any]]]

    def _write(self, sql: str, params: tuple[Any, ...], what: str) -> int:
        def run(db: Any, _: bool) -> int:  # both statements are safe to run again
            with db.transaction():
                return int(db.execute(sql.encode(), params).rowcount)

        return int(self._do(what, run))

    def _read(self, sql: str, params: tuple[Any, ...], what: str) -> list[dict[str, Any]]:
        return self._dicts(what, sql, params)
