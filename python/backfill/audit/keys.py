"""The key an audit matches rows on, and the measures it sums.

The model's ``unique_key`` when it declares one. Otherwise the natural key: the smallest set of
columns (one, two, then three) that is unique and non-null in every compared version over the
backfilled periods (checked in the engine), trying identifier-like columns (``id``, ``*_id``,
``*_no``, ``*_key``, ``*_number``) first, then the event_time, then other dates, timestamps and
strings, then integers; floating and decimal columns never. A model without such a key is
compared on all its columns (a changed row then shows as removed + added).

Measures (summed per partition and in total) are the numeric columns outside the key that are
not identifier-like.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engines import Area, Column, ColumnKind, Engine, Period

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Model, Project

__all__ = [
    "Version",
    "choose_key",
    "first_candidate",
    "is_id_like",
    "measures_of",
    "natural_candidates",
]

_ID_SUFFIXES = ("_id", "_no", "_key", "_number")
_MAX_CANDIDATES = 8


def is_id_like(name: str) -> bool:
    low = name.lower()
    return low == "id" or low.endswith(_ID_SUFFIXES)


@dataclass(frozen=True)
class Version:
    """One version of a model's rows: ``area`` (``preview``: as publishing it would leave them)."""

    area: Area
    preview: bool = False


def natural_candidates(m: Model, columns: Sequence[Column]) -> list[str]:
    """The columns a natural key is looked for among, in the order they are tried."""
    names = [c.name for c in columns]
    kinds = {c.name: c.kind for c in columns}
    ids = [c for c in names if is_id_like(c)]
    et = (
        [m.event_time] if m.event_time and m.event_time in kinds and m.event_time not in ids else []
    )
    rest = [c for c in names if c not in ids and c not in et]
    temporal_text = [c for c in rest if not kinds[c].numeric and kinds[c] != ColumnKind.LIST]
    ints = [c for c in rest if kinds[c] == ColumnKind.INTEGER]
    return ids + et + temporal_text + ints


def choose_key(
    engine: Engine,
    project: Project,
    model: str,
    versions: Sequence[Version],
    columns: Sequence[Column],
    periods: Sequence[Period] | None,
) -> tuple[list[str], str]:
    """The key to match rows of ``model`` on (see the module doc) and where it came from
    (``unique_key``, ``natural`` or ``all columns``); ``columns`` are the first version's."""
    m = project.models[model]
    if m.unique_key:
        return list(m.unique_key), "unique_key"
    cands = natural_candidates(m, columns)[:_MAX_CANDIDATES]
    for size in (1, 2, 3):
        for combo in itertools.combinations(cands, size):
            if all(
                engine.is_unique(project, model, v.area, combo, periods, preview=v.preview)
                for v in versions
            ):
                return list(combo), "natural"
    return [c.name for c in columns], "all columns"


def first_candidate(m: Model, columns: Sequence[Column]) -> str | None:
    """The column :func:`choose_key` tries first for a model without ``unique_key`` (None when
    there is no candidate). A caller whose diff finds it unique and non-null on both sides
    (no duplicate and no null keys) has the key choose_key would return, without its checks."""
    cands = natural_candidates(m, columns)
    return cands[0] if cands and not m.unique_key else None


def measures_of(columns: Sequence[Column], key: Sequence[str], m: Model) -> list[str]:
    """The numeric columns outside the key that are not identifier-like nor the event time."""
    # "rows" would name its sums like the diff's row counts (rows_old, rows_new): not a measure.
    return [
        c.name
        for c in columns
        if c.kind.numeric
        and c.name not in key
        and not is_id_like(c.name)
        and c.name != m.event_time
        and c.name != "rows"
    ]
