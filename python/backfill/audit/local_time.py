"""Partitions of a naive timestamp or date column, as :func:`backfill.diff` cuts them.

The C++ diff reads a timestamp without zone as the wall clock in ``tz`` and a date as the first
instant its date shows in ``tz`` (``cpp/src/arrow/values.cpp``), and places the row in the
partition of that instant. The SQL engines compare such a column with bounds written as naive
literals (a UTC instant's digits: the dialects read a naive column as UTC wall time). So that a
segment scan puts each row in the partition the diff would, the bounds of a naive column are the
wall times in ``tz`` where its partitions begin, and those of a date column the first date whose
first instant is in the partition; a column with a zone keeps the partitions' UTC instants.

A naive wall time ``t`` is the instant ``t - off(t - off(t))`` (``off``: the zone's UTC offset
at an instant), as the C++ computes it: a wall time that a spring-forward skips is read at the
offset before the gap (an hour early), one that a fall-back repeats is its first occurrence. The
wall-time bound of a partition starting at instant ``s`` is the earliest ``t`` read at ``s`` or
later: at hour grain the second ``01:00`` hour of a fall-back night gets no naive time (its
bounds are equal), and a skipped hour's wall times fall into the hour before it, as in the diff.

Not exact where the diff's reading of a skipped span is not one interval per partition: a gap of
two hours at hour grain (Antarctica/Troll), a gap starting one minute after midnight (St. John's
before 2011), a skipped day (Pacific/Apia 2011). There a few wall times of the gap are
fingerprinted in the partition next to the diff's; both sides place them alike, so the
comparison and its totals are still the diff's, but such a row may be counted in the
neighbouring partition of the per-partition table. (``test_crossdiff_naive.py`` checks the
bounds against the diff's own partitions across the DST changes of nine other zones.)
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import itertools
import zoneinfo
from collections.abc import Sequence

from ..calendar import partition_of
from ..engines import ColumnKind, Part

__all__ = ["column_bounds", "column_instant"]

_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_DAY = 86400
#: the step at which a zone's offset is sampled to find its transitions (two transitions less
#: than this apart would be missed: no zone has them)
_STEP = 2 * 3600


def _seconds(instant: dt.datetime) -> int:
    return (instant - _EPOCH) // dt.timedelta(seconds=1)


class _Zone:
    """A zone's offsets, transitions and the diff's reading of its wall times."""

    def __init__(self, tz: str) -> None:
        self.zone = zoneinfo.ZoneInfo(tz)
        self.transitions: list[int] = []  # sorted instants where the offset changes
        self.scanned: tuple[int, int] | None = None

    @functools.lru_cache(maxsize=65536)  # noqa: B019 (one zone per diff, dropped with it)
    def off(self, t: int) -> int:
        """The UTC offset in seconds at instant ``t`` (seconds since the epoch)."""
        offset = (_EPOCH + dt.timedelta(seconds=t)).astimezone(self.zone).utcoffset()
        assert offset is not None
        return offset // dt.timedelta(seconds=1)

    def instant(self, wall: int) -> int:
        """The instant the diff reads the naive wall time ``wall`` as."""
        return wall - self.off(wall - self.off(wall))

    def scan(self, lo: int, hi: int) -> None:
        """Finds the transitions in ``[lo, hi]`` (the first second of each new offset)."""
        if self.scanned is not None and self.scanned[0] <= lo and hi <= self.scanned[1]:
            return
        if self.scanned is not None:
            lo, hi = min(lo, self.scanned[0]), max(hi, self.scanned[1])
        found = []
        t = lo
        while t < hi:
            u = min(t + _STEP, hi)
            if self.off(t) != self.off(u):
                a, b = t, u  # off(a) != off(b): the change is in (a, b]
                while b - a > 1:
                    m = (a + b) // 2
                    a, b = (m, b) if self.off(m) == self.off(t) else (a, m)
                found.append(b)
            t = u
        self.transitions, self.scanned = found, (lo, hi)

    def wall_bound(self, s: int) -> int:
        """The earliest wall time the diff reads as ``s`` or later."""
        lo, hi = s - 2 * _DAY, s + 2 * _DAY
        self.scan(lo - _DAY, hi + _DAY)
        i, j = (bisect.bisect_left(self.transitions, x) for x in (lo - _DAY, hi + _DAY + 1))
        near = self.transitions[i:j]
        if not near:
            return s + self.off(s)
        # The reading is t - c with c constant between these points: the transitions (where
        # off(t) changes) and the wall times t - off(t) reaches one at (where the outer off does).
        offsets = {self.off(lo)} | {self.off(x) for x in near}
        points = {lo, hi, *near, *(x + o for x in near for o in offsets)}
        for b0, b1 in itertools.pairwise(sorted(p for p in points if lo <= p <= hi)):
            c = b0 - self.instant(b0)
            t = max(b0, s + c)
            if t < b1:
                return t
        raise AssertionError(f"no wall time of {self.zone.key} is read at {s} or later")

    def first_date(self, s: int) -> int:
        """The first date (days since 1970-01-01) whose first instant is ``s`` or later."""
        day = (s + self.off(s)) // _DAY - 1
        while self.first_instant(day) < s:
            day += 1
        return day

    def first_instant(self, day: int) -> int:
        date = dt.date(1970, 1, 1) + dt.timedelta(days=day)
        return _seconds(partition_of(date, "day", self.zone.key).start)


def column_instant(value: dt.datetime | dt.date, tz: str) -> dt.datetime:
    """The instant the diff reads a partition column's ``value`` as: an aware timestamp as it
    is, a naive one as the wall clock in ``tz``, a date as its first instant in ``tz``."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return value.astimezone(_UTC)
        if tz == "UTC":
            return value.replace(tzinfo=_UTC)
        naive = value.replace(tzinfo=_UTC)
        whole = _seconds(naive)
        return naive + dt.timedelta(seconds=_Zone(tz).instant(whole) - whole)
    return partition_of(value, "day", tz).start


def column_bounds(parts: Sequence[Part], kind: ColumnKind, tz: str) -> list[Part]:
    """``parts`` (UTC instants) with the bounds a column of ``kind`` is compared with in SQL
    (naive literals of UTC datetimes): wall times in ``tz`` for a naive timestamp, dates (at
    midnight) for a date, unchanged for a timestamp with zone or in UTC."""
    if tz == "UTC" or kind not in (ColumnKind.TIMESTAMP, ColumnKind.DATE):
        return list(parts)
    zone = _Zone(tz)
    if parts:
        zone.scan(_seconds(parts[0][1]) - 4 * _DAY, _seconds(parts[-1][2]) + 4 * _DAY)

    def bound(instant: dt.datetime) -> dt.datetime:
        s = _seconds(instant)
        t = zone.first_date(s) * _DAY if kind == ColumnKind.DATE else zone.wall_bound(s)
        return _EPOCH + dt.timedelta(seconds=t)

    return [(label, bound(start), bound(end)) for label, start, end in parts]
