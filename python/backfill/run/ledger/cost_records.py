"""What the ledger keeps about costs (schema version 6): the measured durations of past task
attempts (already in ``attempts``; read per model across a project's recent backfills) and the
sample runs of ``backfill estimate`` (``cost_samples``), so that a later plan estimates from
measurements instead of assumptions. Since schema version 8 each names the engine type that
measured it (``backfills.engine_type``, ``cost_samples.engine_type``). The rows a task wrote per
partition come from its attempt's fingerprint, where the engine counted them in the write.
:class:`~.sql.SqlLedger` runs the statements; here are the keys callers pass and how rows become
:class:`~.records.CostMeasure`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...errors import InvalidInputError
from .records import CostMeasure, require_keys, stored_task_fingerprint

__all__ = [
    "COST_SAMPLE_KEYS",
    "HISTORY_KEYS",
    "HISTORY_RUN_COLUMNS",
    "HISTORY_SAMPLE_COLUMNS",
    "OPTIONAL_COST_SAMPLE_KEYS",
    "history",
    "sample_rows",
]

#: One sample run of ``backfill estimate``: the model, the hash of its SQL then, the sampled
#: partition's label, how many partitions it covered, its seconds and rows, when. A sample may
#: also name its ``engine_type`` (:data:`OPTIONAL_COST_SAMPLE_KEYS`; None: not recorded).
COST_SAMPLE_KEYS = ("model", "sql_hash", "label", "partitions", "seconds", "rows", "created_at")
OPTIONAL_COST_SAMPLE_KEYS = ("engine_type",)

#: The fields of each :class:`~.records.CostMeasure` ``cost_history`` returns.
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
    "engine_type",
    "start",
    "end",
    "label",
    "partition_rows",
)

#: What :func:`history` reads of a done attempt (``t``: its task, ``a``: it, ``b``: its backfill)
HISTORY_RUN_COLUMNS = (
    "t.model, t.partitions, a.seconds, a.started_at, a.finished_at, a.rows_written, "
    'a.backfill_id, b.models, b.engine_type, t.start, t."end", t.label, a.fingerprint'
)
#: ... and of a sample run (``cost_samples``)
HISTORY_SAMPLE_COLUMNS = (
    "model, partitions, seconds, rows_written, sql_hash, created_at, engine_type, label"
)


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


def sample_rows(project: str, samples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``cost_samples`` rows of ``samples`` (:data:`COST_SAMPLE_KEYS`), checked."""
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
            {
                "project": project,
                "model": s["model"],
                "sql_hash": s["sql_hash"],
                "label": s["label"],
                "partitions": int(s["partitions"]),
                "seconds": seconds,
                "rows": s["rows"],
                "created_at": s["created_at"],
                "engine_type": s.get("engine_type"),
            }
        )
    return rows


def _partition_rows(fingerprint: str | None) -> dict[str, int] | None:
    """label -> rows of the partitions an attempt's stored fingerprint lists (the engine
    counted them in the write); None when it lists none or cannot be read (history is advice:
    an unreadable fingerprint costs the estimate its detail, never the plan)."""
    try:
        fp = stored_task_fingerprint(fingerprint)
    except InvalidInputError:
        return None
    if fp is None or not fp.partitions:
        return None
    return {label: p.rows for label, p in fp.partitions.items()}


def _text(value: Any) -> str | None:
    # A period bound is ISO text on both backends; keep it as read (None stays None).
    return None if value is None else str(value)


def history(runs: Iterable[Sequence[Any]], samples: Iterable[Sequence[Any]]) -> list[CostMeasure]:
    """The measurements of the rows read with :data:`HISTORY_RUN_COLUMNS` (``runs``) and
    :data:`HISTORY_SAMPLE_COLUMNS` (``samples``), in that order."""
    out = [
        CostMeasure(
            source="run",
            model=model,
            partitions=int(parts),
            seconds=None if secs is None else float(secs),
            wall_seconds=_seconds_between(started, finished),
            rows=rows,
            sql_hash=_hash_of(hashes, model),
            backfill_id=bf,
            finished_at=finished,
            engine_type=engine,
            start=_text(start),
            end=_text(end),
            label=label,
            partition_rows=_partition_rows(fp),
        )
        for (
            model,
            parts,
            secs,
            started,
            finished,
            rows,
            bf,
            hashes,
            engine,
            start,
            end,
            label,
            fp,
        ) in runs
    ]
    out += [
        CostMeasure(
            source="sample",
            model=model,
            partitions=int(parts),
            seconds=float(secs),
            wall_seconds=None,
            rows=rows,
            sql_hash=sql_hash,
            backfill_id=None,
            finished_at=created,
            engine_type=engine,
            label=label,
        )
        for model, parts, secs, rows, sql_hash, created, engine, label in samples
    ]
    return out
