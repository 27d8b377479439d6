"""The partition calendar: which period of time a run covers.

Partitions are half-open intervals ``[start, end)`` of UTC time, cut by a grain (hour, day, ISO
week, month, quarter, year) in an IANA time zone. They are correct across DST, half-hour and
45-minute offsets, and zones whose midnight is skipped. The rules, in short (the full text is at
the top of ``cpp/include/backfill/calendar.hpp``):

* a day (and any coarser period) starts at the first instant its first date shows on the wall
  clock; where a fall-back crosses midnight, the repeated time belongs to the later date;
* an hour partition is one wall-clock hour at one UTC offset, so a fall-back night has two
  ``02:00`` partitions (``...T02+02:00`` and ``...T02+01:00``) and a skipped hour has none.

>>> import backfill
>>> [p.label for p in backfill.partitions("day", "2026-10-24", "2026-10-27", tz="Europe/Berlin")]
['2026-10-24', '2026-10-25', '2026-10-26']
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import logging
import os
import zoneinfo
from pathlib import Path
from typing import Literal

from . import _core

_log = logging.getLogger(__name__)

Instant = _dt.datetime | _dt.date | str
Grain = Literal["hour", "day", "week", "month", "quarter", "year"]
GRAINS: tuple[str, ...] = ("hour", "day", "week", "month", "quarter", "year")

Partition = _core.Partition
PeriodSet = _core.PeriodSet


def _choose_tz_database() -> None:
    """Reads zones from where Python's ``zoneinfo`` does, so the two always agree.

    The OS's zone files first (``zoneinfo.TZPATH``: /usr/share/zoneinfo and friends, updated with
    the OS), else those of the ``tzdata`` package (a dependency, for machines and slim images
    without an OS tz database). ``$TZDIR`` overrides both.
    """
    if os.environ.get("TZDIR"):
        return
    for directory in zoneinfo.TZPATH:
        if os.path.isfile(os.path.join(directory, "UTC")):
            _core.set_tz_database_dir(directory)
            return
    spec = importlib.util.find_spec("tzdata")
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))) / "zoneinfo"
        if (folder / "UTC").is_file():
            _core.set_tz_database_dir(str(folder))
            return
    _log.warning(
        "no time zone database found (no OS zoneinfo and no tzdata package): only UTC "
        "works; pip install tzdata"
    )


def tz_database() -> str:
    """The directory of compiled zone files backfill reads time zones from."""
    return _core.tz_database_dir()


_choose_tz_database()


def partition_of(instant: Instant, grain: Grain | str, tz: str = "UTC") -> Partition:
    """The partition of ``grain`` in ``tz`` that contains ``instant``.

    ``instant`` is a tz-aware datetime, or a date / ISO-8601 string (date-only and naive strings
    are wall-clock time in ``tz``). Naive datetimes are refused: they name no instant.
    """
    return _core.partition_of(instant, grain, tz)


def partitions(
    grain: Grain | str,
    start: Instant,
    end: Instant,
    tz: str = "UTC",
    align: Literal["strict", "expand"] = "strict",
) -> list[Partition]:
    """Every partition of ``grain`` in ``tz`` within ``[start, end)``, in time order.

    With ``align="strict"`` a bound that is not a partition boundary raises
    :class:`~backfill.InvalidInputError` naming it and the nearest boundaries; ``"expand"`` widens
    the range to whole partitions.
    """
    return _core.partitions(grain, start, end, tz, align)


__all__ = [
    "GRAINS",
    "Grain",
    "Instant",
    "Partition",
    "PeriodSet",
    "partition_of",
    "partitions",
    "tz_database",
]
