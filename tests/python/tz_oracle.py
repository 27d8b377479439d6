"""Partition bounds computed independently with zoneinfo, by searching wall-clock readings.

Nothing here uses backfill: it scans and bisects instants, asking zoneinfo what the wall clock
shows, so it shares no arithmetic (and no tz library) with the C++ calendar.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

UTC = dt.timezone.utc


def wall(t: int, zone: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, UTC).astimezone(zone)


def local_date(t: int, zone: ZoneInfo) -> dt.date:
    return wall(t, zone).date()


def first_instant(day: dt.date, zone: ZoneInfo) -> int:
    """The first instant at which the wall clock shows ``day``."""
    naive = int(dt.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())
    step = 900  # every transition in 2000-2040 is at least 15 minutes from the next
    t = naive - 15 * 3600
    while local_date(t, zone) != day:
        t += step
    lo, hi = t - step, t  # wall date is not `day` at lo, is at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if local_date(mid, zone) == day:
            hi = mid
        else:
            lo = mid
    return hi


def period_first_day(day: dt.date, grain: str) -> dt.date:
    if grain == "day":
        return day
    if grain == "week":
        return day - dt.timedelta(days=day.weekday())
    if grain == "month":
        return day.replace(day=1)
    if grain == "quarter":
        return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
    if grain == "year":
        return day.replace(month=1, day=1)
    raise ValueError(grain)


def next_period_first_day(first: dt.date, grain: str) -> dt.date:
    if grain == "day":
        return first + dt.timedelta(days=1)
    if grain == "week":
        return first + dt.timedelta(days=7)
    months = {"month": 1, "quarter": 3, "year": 12}[grain]
    m = first.month - 1 + months
    return dt.date(first.year + m // 12, m % 12 + 1, 1)


def prev_period_first_day(first: dt.date, grain: str) -> dt.date:
    return period_first_day(first - dt.timedelta(days=1), grain)


def period_bounds(t: int, grain: str, zone: ZoneInfo) -> tuple[int, int, dt.date]:
    """(start, end, first local date) of the day-or-coarser period containing t, by definition:
    a period runs from the first instant its first date is shown to that of the next period."""
    first = period_first_day(local_date(t, zone), grain)
    while True:
        start = first_instant(first, zone)
        end = first_instant(next_period_first_day(first, grain), zone)
        if t < start:
            first = prev_period_first_day(first, grain)
        elif t >= end:
            first = next_period_first_day(first, grain)
        else:
            return start, end, first


def hour_key(t: int, zone: ZoneInfo) -> tuple[dt.datetime, dt.timedelta | None]:
    w = wall(t, zone)
    return w.replace(minute=0, second=0, microsecond=0, tzinfo=None), w.utcoffset()


def hour_bounds(t: int, zone: ZoneInfo) -> tuple[int, int]:
    """The maximal interval around t with one wall-clock hour and one UTC offset (<= 1 hour)."""
    key = hour_key(t, zone)
    lo, hi = t - 3601, t  # key differs at lo, equals at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if hour_key(mid, zone) == key:
            hi = mid
        else:
            lo = mid
    start = hi
    lo, hi = t, t + 3601  # key equals at lo, differs at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if hour_key(mid, zone) == key:
            lo = mid
        else:
            hi = mid
    return start, hi


def hour_label(start: int, zone: ZoneInfo, utc: bool) -> str:
    w = wall(start, zone)
    if utc:
        return w.strftime("%Y-%m-%dT%H")
    off = w.utcoffset()
    assert off is not None
    minutes = int(off.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{w:%Y-%m-%dT%H}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def period_label(first: dt.date, grain: str) -> str:
    if grain == "day":
        return first.isoformat()
    if grain == "week":
        year, week, _ = first.isocalendar()
        return f"{year:04d}-W{week:02d}"
    if grain == "month":
        return f"{first.year:04d}-{first.month:02d}"
    if grain == "quarter":
        return f"{first.year:04d}-Q{(first.month - 1) // 3 + 1}"
    return f"{first.year:04d}"
