"""What the ledger keeps about costs (schema version 6), for both backends: the measured
durations of past task attempts (already in ``attempts``; read here per model across a
project's recent backfills) and the sample runs of ``backfill estimate`` (``cost_samples``), so
that a later plan estimates from measurements instead of assumptions.

The statements are the same in SQLite and Postgres but for the placeholder; each backend mixes
in its class and provides the transaction it runs them in.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...errors import InvalidInputError
from .records import LedgerError, require_keys

__all__ = ["COST_SAMPLE_KEYS", "HISTORY_KEYS", "V6_SQL", "PostgresCostRecords", "SqliteCostRecords"]

#: One sample run of ``backfill estimate``: the model, the hash of its SQL then, the sampled
#: partition's label, how many partitions it covered, its seconds and rows, when.
COST_SAMPLE_KEYS = ("model", "sql_hash", "label", "partitions", "seconds", "rows", "created_at")

#: What :meth:`cost_history` returns per measurement: ``source`` is ``"run"`` (a done attempt of
#: a backfill's task) or ``"sample"``; ``sql_hash`` the model's SQL hash when it was measured
#: (None when the backfill did not record one); ``wall_seconds`` the attempt's duration from its
#: stamps (None for samples); ``backfill_id`` None for samples.
HISTORY_KEYS = (
    "source",
    "model",
    "partitions",
    "seconds",
    "wall_seconds",
    "rows",
    "sql_hash",
    "backfill_id",
    "finished_at",
)

V6_SQL = """
CREATE TABLE IF NOT EXISTS cost_samples (
    project TEXT NOT NULL,
    model TEXT NOT NULL,
    sql_hash TEXT,
    label TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    seconds DOUBLE PRECISION NOT NULL,
    rows_written BIGINT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cost_samples_model ON cost_samples (project, model, created_at)
"""

_INSERT = (
    "INSERT INTO cost_samples (project, model, sql_hash, label, partitions, seconds, "
    "rows_written, created_at) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})"
)
# The project's most recent backfills first (primary keys lead from them to their tasks and
# attempts), so reading history costs what a few backfills hold, however long the ledger is.
_RUNS = """
SELECT t.model, t.partitions, a.seconds, a.started_at, a.finished_at, a.rows_written,
       a.backfill_id, b.models
FROM (SELECT id, models, created_at FROM backfills WHERE project = {p}
      ORDER BY created_at DESC, id DESC LIMIT {p}) b
JOIN attempts a ON a.backfill_id = b.id
JOIN tasks t ON t.backfill_id = a.backfill_id AND t.task_id = a.task_id
WHERE a.status = 'done' AND t.model IN ({models})
ORDER BY b.created_at DESC, a.id DESC
"""
_SAMPLES = """
SELECT model, partitions, seconds, rows_written, sql_hash, created_at FROM cost_samples
WHERE project = {p} AND model IN ({models}) ORDER BY created_at DESC
"""


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return max(
            0.0, (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
        )
    except ValueError:
        return None


def _hash_of(models_json: str | None, model: str) -> str | None:
    try:
        value = json.loads(models_json or "{}").get(model)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


class _CostRecords:
    _placeholder = "?"

    def _write_many(self, sql: str, rows: list[tuple[Any, ...]], what: str) -> None:
        raise NotImplementedError

    def _select(self, sql: str, params: tuple[Any, ...], what: str) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def record_cost_samples(self, project: str, samples: Sequence[Mapping[str, Any]]) -> None:
        """Keeps the sample runs (:data:`COST_SAMPLE_KEYS`) of one ``backfill estimate`` of
        ``project``, in one step."""
        rows = []
        for s in samples:
            require_keys(s, COST_SAMPLE_KEYS, f"cost sample of {s.get('model')!r}")
            seconds = float(s["seconds"])
            if not seconds >= 0 or int(s["partitions"]) < 1:
                raise InvalidInputError(
                    f"cost sample of {s['model']!r}: seconds {seconds!r} and "
                    f"partitions {s['partitions']!r}; expected >= 0 and >= 1"
                )
            rows.append(
                (
                    project,
                    s["model"],
                    s["sql_hash"],
                    s["label"],
                    int(s["partitions"]),
                    seconds,
                    s["rows"],
                    s["created_at"],
                )
            )
        if rows:
            self._write_many(_INSERT.format(p=self._placeholder), rows, "recording cost samples")

    def cost_history(
        self, project: str, models: Sequence[str], backfills: int = 20
    ) -> list[dict[str, Any]]:
        """The measurements (:data:`HISTORY_KEYS`) of ``models``: the done attempts of their
        tasks in ``project``'s ``backfills`` most recent backfills (newest backfill first),
        then the sample runs of ``backfill estimate`` (newest first)."""
        if not models:
            return []
        p = self._placeholder
        marks = ", ".join([p] * len(models))
        out: list[dict[str, Any]] = []
        for model, parts, secs, started, finished, rows, bf, hashes in self._select(
            _RUNS.format(p=p, models=marks),
            (project, int(backfills), *models),
            "reading cost history",
        ):
            out.append(
                {
                    "source": "run",
                    "model": model,
                    "partitions": int(parts),
                    "seconds": None if secs is None else float(secs),
                    "wall_seconds": _seconds_between(started, finished),
                    "rows": rows,
                    "sql_hash": _hash_of(hashes, model),
                    "backfill_id": bf,
                    "finished_at": finished,
                }
            )
        for model, parts, secs, rows, sql_hash, created in self._select(
            _SAMPLES.format(p=p, models=marks), (project, *models), "reading cost samples"
        ):
            out.append(
                {
                    "source": "sample",
                    "model": model,
                    "partitions": int(parts),
                    "seconds": float(secs),
                    "wall_seconds": None,
                    "rows": rows,
                    "sql_hash": sql_hash,
                    "backfill_id": None,
                    "finished_at": created,
                }
            )
        return out


class SqliteCostRecords(_CostRecords):
    path: Any
    _tx: Callable[[], contextlib.AbstractContextManager[Any]]
    _conn: Callable[[], Any]

    def _write_many(self, sql: str, rows: list[tuple[Any, ...]], what: str) -> None:
        try:
            with self._tx() as db:
                db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path}: {what} failed: {exc}") from exc

    def _select(self, sql: str, params: tuple[Any, ...], what: str) -> list[tuple[Any, ...]]:
        try:
            return list(self._conn().execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path}: {what} failed: {exc}") from exc


class PostgresCostRecords(_CostRecords):
    _placeholder = "%s"
    _do: Callable[..., Any]

    def _write_many(self, sql: str, rows: list[tuple[Any, ...]], what: str) -> None:
        def run(db: Any, retry: bool) -> None:
            # A retry after an unknown COMMIT outcome may record the samples twice; the medians
            # read from them do not change.
            with db.transaction(), db.cursor() as cur:
                cur.executemany(sql.encode(), rows)

        self._do(what, run)

    def _select(self, sql: str, params: tuple[Any, ...], what: str) -> list[tuple[Any, ...]]:
        def run(db: Any, _: bool) -> list[tuple[Any, ...]]:
            return list(db.execute(sql.encode(), params).fetchall())

        result: list[tuple[Any, ...]] = self._do(what, run)
        return result
