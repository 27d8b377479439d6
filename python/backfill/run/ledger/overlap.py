"""Overlapping backfills: two open backfills of one project that write the same (model, partition).

Both would publish, and the second would silently replace what the first published (or, audited
before the first published, be refused only at its publish). Every backend finds them the same
way, from rows it reads inside the transaction that records the new backfill, so that of two
backfills recorded at the same time the second sees the first:

>>> find_overlaps(new_tasks, open_rows)      # doctest: +SKIP
[Overlap('bf_20260801_...', 'ana', 'running', 'fx rates', 'fct_daily_sales', ...)]

``open_rows`` are the tasks of the project's open backfills (:data:`~.states.OPEN`: pending,
running, failed or done -- all may still publish -- but not a direct backfill that is done). Task
bounds are ISO 8601 UTC text as stored (:func:`~.records.iso_utc`), which compare as instants;
an unpartitioned task (no bounds) is the whole table, overlapping every task of its model.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ConflictError
from .records import iso_utc
from .states import OPEN, BackfillState

__all__ = [
    "OPEN_ROWS_SQL",
    "Overlap",
    "OverlapError",
    "find_overlaps",
    "overlap_error",
    "overlap_lock_key",
]


# The tasks of a project's open backfills (param: project); the join reads tasks through their
# (backfill_id, ...) index.
# A direct backfill that is done wrote the published tables already: nothing of it is left to
# publish, so it no longer overlaps anything.
OPEN_ROWS_SQL = (
    'SELECT b.id AS backfill_id, b.created_by, b.status, b.reason, t.model, t.start, t."end", '
    "t.label FROM backfills b JOIN tasks t ON t.backfill_id = b.id WHERE b.project = :project AND "
    "b.status IN (" + ", ".join(f"'{s.value}'" for s in OPEN) + ") AND NOT "
    f"(b.status = '{BackfillState.DONE.value}' AND b.mode = 'direct')"
)


@dataclass(frozen=True)
class Overlap:
    """Where an open backfill writes what a new one would: one per (backfill, model)."""

    backfill_id: str
    created_by: str
    status: str
    reason: str
    model: str
    first: str  # label of its first overlapping task ("2026-08-01"; "full")
    last: str
    tasks: int  # its tasks that overlap

    def __str__(self) -> str:
        period = self.first if self.first == self.last else f"{self.first}..{self.last}"
        noun = "task" if self.tasks == 1 else "tasks"
        return (
            f"{self.backfill_id} ({self.status}, by {self.created_by}, {self.reason!r}) "
            f"writes {self.model} {period} ({self.tasks} {noun})"
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class OverlapError(ConflictError):
    """A new backfill would write partitions an open backfill writes too; ``overlaps`` says
    which. Nothing was recorded."""

    def __init__(self, message: str, overlaps: Sequence[Overlap]) -> None:
        super().__init__(message)
        self.overlaps = list(overlaps)


def find_overlaps(
    tasks: Sequence[Mapping[str, Any]], open_rows: Iterable[Mapping[str, Any]]
) -> list[Overlap]:
    """The overlaps of the new backfill's ``tasks`` (``model``, ``start``, ``end``: datetimes or
    None) with ``open_rows`` (``backfill_id``, ``created_by``, ``status``, ``reason``,
    ``model``, ``start``, ``end``: stored text, ``label``), by backfill then model.
    O((N + M) log N) for N new and M open tasks."""
    mine: dict[str, list[tuple[str, str]]] = {}  # model -> sorted, merged (start, end)
    whole: set[str] = set()
    for t in tasks:
        start, end = iso_utc(t["start"]), iso_utc(t["end"])
        if start is None or end is None:
            whole.add(t["model"])
        else:
            mine.setdefault(t["model"], []).append((start, end))
    merged: dict[str, tuple[list[str], list[str]]] = {}
    for model, spans in mine.items():
        starts: list[str] = []
        ends: list[str] = []
        for lo, hi in sorted(spans):
            if ends and lo <= ends[-1]:
                ends[-1] = max(ends[-1], hi)
            else:
                starts.append(lo)
                ends.append(hi)
        merged[model] = (starts, ends)
    found: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in open_rows:
        model = row["model"]
        if model not in whole and model not in merged:
            continue
        if (
            model in whole
            or row["start"] is None
            or row["end"] is None
            or _hits(merged[model], row["start"], row["end"])
        ):
            found.setdefault((row["backfill_id"], model), []).append(row)
    out = []
    for (bid, model), rows in sorted(found.items()):
        rows = sorted(rows, key=lambda r: (r["start"] or "", r["label"]))
        r0 = rows[0]
        out.append(
            Overlap(
                bid,
                str(r0["created_by"]),
                str(r0["status"]),
                str(r0["reason"]),
                model,
                str(r0["label"]),
                str(rows[-1]["label"]),
                len(rows),
            )
        )
    return out


def _hits(spans: tuple[list[str], list[str]], lo: str, hi: str) -> bool:
    """Whether [lo, hi) meets one of the merged spans (sorted starts and ends)."""
    starts, ends = spans
    i = bisect.bisect_left(starts, hi) - 1  # the last span starting before hi
    return i >= 0 and ends[i] > lo


def overlap_error(backfill_id: str, overlaps: Sequence[Overlap]) -> OverlapError:
    """The error refusing ``backfill_id``: names each other backfill, its owner and the overlap,
    and the two ways on."""
    lines = "\n  ".join(str(o) for o in overlaps)
    others = sorted({o.backfill_id for o in overlaps})
    return OverlapError(
        f"backfill {backfill_id} would write partitions that open backfill(s) "
        f"{', '.join(others)} write too; both would publish, the later silently replacing the "
        f"earlier:\n  {lines}\nPublish, discard or cancel the other first, narrow the "
        "selection or period, or record this one anyway with allow_overlap='why' "
        "(--allow-overlap REASON)",
        overlaps,
    )


def overlap_lock_key(project: str) -> int:
    """A stable signed 64-bit key per project, for a database lock that serializes creates."""
    digest = hashlib.sha256(f"backfill.create:{project}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
