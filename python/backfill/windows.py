"""Run windows and budgets: when a backfill may claim tasks, and how much engine time it may use.

>>> from backfill.windows import Windows, parse_duration
>>> w = Windows.parse(["22:00-06:00 Europe/Berlin", "Sat-Sun 00:00-24:00 Europe/Berlin"])
>>> parse_duration("3h")
10800.0

A window is ``[DAYS] HH:MM-HH:MM ZONE``: a wall-clock span in an IANA zone, on every day or on
the given weekdays (``Mon-Fri``, ``Sat,Sun``, ``Sun``; the day is the one the window OPENS on, so
``Fri 22:00-06:00`` closes Saturday 06:00). ``24:00`` is the end of the day. A span whose end is
not after its start crosses midnight. Several windows are their union.

Wall-clock times become instants through the C++ calendar (:mod:`backfill.calendar`), so windows
are exact across DST: ``22:00-06:00`` is 8 hours most nights, 9 on the October night clocks fall
back and 7 in March. A time the wall clock skips (02:30 on the spring-forward night) is the end of
the gap; a time it shows twice (02:30 in October) is its first occurrence.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import _core
from .errors import InvalidInputError

__all__ = ["Window", "Windows", "format_duration", "parse_duration"]

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WINDOW_RE = re.compile(
    r"^(?:(?P<days>[A-Za-z,\- ]+?)\s+)?(?P<open>\d{1,2}:\d{2})\s*-\s*"
    r"(?P<close>\d{1,2}:\d{2})(?:\s+(?P<tz>\S+))?$"
)
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|min|s)")
_UNIT = {"d": 86400.0, "h": 3600.0, "m": 60.0, "min": 60.0, "s": 1.0}
_WEEK = 7 * 1440  # minutes


def parse_duration(text: str | float | int, what: str = "budget") -> float:
    """Seconds from ``"3h"``, ``"90m"``, ``"1h30m"``, ``"2d"``, ``"45s"`` or a number of seconds.
    InvalidInputError naming the value otherwise (also for zero or negative durations)."""
    if isinstance(text, bool):
        raise InvalidInputError(f"{what} {text!r} is not a duration; expected e.g. '3h', '90m'")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        s = str(text).strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", s):
            seconds = float(s)
        elif s and re.fullmatch(rf"(?:{_DURATION_RE.pattern})+", s):
            seconds = sum(float(n) * _UNIT[u] for n, u in _DURATION_RE.findall(s))
        else:
            raise InvalidInputError(
                f"{what} {text!r} is not a duration; expected e.g. '3h', "
                "'90m', '1h30m', '2d' or a number of seconds"
            )
    if not seconds > 0:
        raise InvalidInputError(f"{what} {text!r}: expected a duration above zero")
    if not math.isfinite(seconds):  # "1e999" or 400 digits: float() gives inf (found by fuzzing)
        raise InvalidInputError(f"{what} {text!r}: expected a finite duration")
    return seconds


def format_duration(seconds: float) -> str:
    """``2h 05m``, ``4m 10s``, ``12.3 s``: a duration as people read it."""
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {sec:02d}s"


def _minutes(text: str, spec: str, *, end: bool) -> int:
    hh, mm = (int(x) for x in text.split(":"))
    if mm > 59 or hh > 24 or (hh == 24 and (mm or not end)):
        raise InvalidInputError(
            f"window {spec!r}: time {text!r} is not a wall-clock time "
            "(00:00-23:59, or 24:00 as an end)"
        )
    return hh * 60 + mm


def _days(text: str | None, spec: str) -> frozenset[int]:
    if not text:
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.replace(" ", "").lower().split(","):
        ends = part.split("-")
        try:
            idx = [
                _DAYS.index(e[:3])
                for e in ends
                if len(e) >= 3
                and (
                    e in _DAYS
                    or e
                    in (
                        "monday",
                        "tuesday",
                        "wednesday",
                        "thursday",
                        "friday",
                        "saturday",
                        "sunday",
                    )
                )
            ]
        except ValueError:
            idx = []
        if len(idx) != len(ends) or len(ends) > 2:
            raise InvalidInputError(
                f"window {spec!r}: days {text!r} are not weekdays; expected "
                "e.g. 'Mon-Fri', 'Sat,Sun' or 'Sun'"
            )
        first, last = idx[0], idx[-1]
        days.update((first + i) % 7 for i in range((last - first) % 7 + 1))
    return frozenset(days)


@dataclass(frozen=True)
class Window:
    """One window: ``open``/``close`` minutes after local midnight (``close`` may be 1440, or
    at most ``open`` for a window that crosses midnight), on ``days`` (0 = Monday)."""

    spec: str
    days: frozenset[int]
    open: int
    close: int
    tz: str

    @classmethod
    def parse(cls, spec: str, default_tz: str | None = None) -> Window:
        if not isinstance(spec, str) or not spec.strip():
            raise InvalidInputError(
                f"window {spec!r}: expected e.g. '22:00-06:00 Europe/Berlin' "
                "or 'Sat-Sun 00:00-24:00 UTC'"
            )
        m = _WINDOW_RE.match(spec.strip())
        if m is None:
            raise InvalidInputError(
                f"window {spec!r}: expected '[DAYS] HH:MM-HH:MM ZONE', e.g. "
                "'22:00-06:00 Europe/Berlin' or 'Sat-Sun 00:00-24:00 UTC'"
            )
        tz = m["tz"] or default_tz
        if tz is None:
            raise InvalidInputError(
                f"window {spec!r} names no time zone; expected e.g. '{spec.strip()} Europe/Berlin'"
            )
        try:
            tz = _core.check_zone(tz)
        except InvalidInputError as exc:
            raise InvalidInputError(f"window {spec!r}: {exc}") from None
        opens = _minutes(m["open"], spec, end=False)
        closes = _minutes(m["close"], spec, end=True)
        if opens == closes:
            raise InvalidInputError(
                f"window {spec!r} is empty: it opens and closes at "
                f"{m['open']}; for a whole day write 00:00-24:00"
            )
        return cls(spec.strip(), _days(m["days"], spec), opens, closes, tz)

    @property
    def length(self) -> int:
        """Nominal length in wall-clock minutes."""
        return self.close - self.open if self.close > self.open else self.close + 1440 - self.open

    def week_spans(self) -> list[tuple[int, int]]:
        """Minutes of the (wall-clock) week it covers, wrapped spans split in two."""
        out: list[tuple[int, int]] = []
        for d in sorted(self.days):
            start = d * 1440 + self.open
            end = start + self.length
            out += [(start, min(end, _WEEK))] + ([(0, end - _WEEK)] if end > _WEEK else [])
        return out

    def instants(self, day: dt.date) -> tuple[dt.datetime, dt.datetime] | None:
        """The UTC [open, close) of this window opening on local ``day``, or None when ``day``
        is not one of its days."""
        if day.weekday() not in self.days:
            return None
        close_day = day if self.close > self.open else day + dt.timedelta(days=1)
        return _at(day, self.open, self.tz), _at(close_day, self.close, self.tz)


def _at(day: dt.date, minutes: int, tz: str) -> dt.datetime:
    """The instant the wall clock of ``tz`` shows ``minutes`` after midnight of ``day``. The
    calendar's hour partitions of that day give each wall-clock hour its UTC start, so a DST
    change is exact: a skipped time is the end of the gap, a time shown twice its first time."""
    if minutes < 1440:
        hour, minute = divmod(minutes, 60)
        for p in _core.partitions("hour", day, day + dt.timedelta(days=1), tz, "expand"):
            shown = int(p.label[11:13])  # label: YYYY-MM-DDTHH+OO:OO
            if p.label[:10] == day.isoformat() and shown >= hour:
                return p.start + dt.timedelta(minutes=minute if shown == hour else 0)
    return _core.partition_of(day + dt.timedelta(days=1), "day", tz).start


@dataclass(frozen=True)
class Windows:
    """A union of :class:`Window`s. ``open_at(t)``: the close of the window holding ``t`` (None
    outside); ``next_open(t)``: when the next one opens."""

    windows: tuple[Window, ...]

    @classmethod
    def parse(cls, specs: str | Iterable[str], default_tz: str | None = None) -> Windows:
        """Windows from one spec, a ``;``-separated string of them, or a list. Overlapping
        windows are refused (naming both): they say the same hours twice, usually by mistake."""
        items = specs.split(";") if isinstance(specs, str) else list(specs)
        if not items:
            raise InvalidInputError(
                "windows []: expected at least one, e.g. '22:00-06:00 Europe/Berlin'"
            )
        ws = tuple(Window.parse(s, default_tz) for s in items)
        for i, a in enumerate(ws):
            for b in ws[i + 1 :]:
                if a.tz == b.tz and any(
                    s1 < e2 and s2 < e1 for s1, e1 in a.week_spans() for s2, e2 in b.week_spans()
                ):
                    raise InvalidInputError(
                        f"windows {a.spec!r} and {b.spec!r} overlap; give "
                        "each hour once (or one window covering both)"
                    )
        return cls(ws)

    @property
    def specs(self) -> list[str]:
        return [w.spec for w in self.windows]

    def _spans(self, around: dt.datetime, days: int = 9) -> list[tuple[dt.datetime, dt.datetime]]:
        """The windows' UTC spans opening from two days before ``around`` to ``days`` after,
        merged where they touch or overlap (windows in different zones may), in time order."""
        spans = []
        for w in self.windows:
            local = around.astimezone(dt.timezone.utc) + dt.timedelta(hours=14)  # widest offset
            first = local.date() - dt.timedelta(days=2)
            for i in range(days + 2):
                got = w.instants(first + dt.timedelta(days=i))
                if got is not None and got[0] < got[1]:
                    spans.append(got)
        merged = _core.PeriodSet(spans) if spans else None
        return [] if merged is None else list(merged.intervals)

    def open_at(self, now: dt.datetime) -> dt.datetime | None:
        """When the window holding ``now`` closes (windows that touch count as one), or None
        when no window is open at ``now``."""
        for start, end in self._spans(now):
            if start <= now < end:
                return end
        return None

    def next_open(self, now: dt.datetime) -> dt.datetime:
        """When the next window opens after ``now`` (``now`` itself when one is open)."""
        for start, end in self._spans(now):
            if end > now:
                return max(start, now)
        raise InvalidInputError(f"windows {self.specs} never open")  # pragma: no cover

    def describe_open(self, when: dt.datetime, now: dt.datetime | None = None) -> str:
        """``22:00 CET`` (``Sat 10 Oct 00:00 CEST`` when a day or more from ``now``): when a
        window opens, in the zone of the window that opens then."""
        tz = self.windows[0].tz
        for w in self.windows:
            got = w.instants(_local_date(when, w.tz))
            if got is not None and got[0] == when:
                tz = w.tz
                break
        local = _local(when, tz)
        near = now is not None and when - now < dt.timedelta(hours=20)
        return (
            f"{local:%H:%M} {local.tzname()}"
            if near
            else f"{local:%a %d %b %H:%M} {local.tzname()}"
        )


def _local(when: dt.datetime, tz: str) -> dt.datetime:
    # Only to display a time: the zone's abbreviation (CET/CEST) comes from the system tz data.
    import zoneinfo

    try:
        return when.astimezone(zoneinfo.ZoneInfo(tz))
    except zoneinfo.ZoneInfoNotFoundError:  # pragma: no cover - no tz database: show UTC
        return when.astimezone(dt.timezone(dt.timedelta(0)))


def _local_date(when: dt.datetime, tz: str) -> dt.date:
    return dt.date.fromisoformat(_core.partition_of(when, "day", tz).label)


def check_specs(value: object, where: str) -> list[str]:
    """``window:`` of a project file or a backfill: one string or a list of strings, checked."""
    specs = [value] if isinstance(value, str) else value
    if not isinstance(specs, Sequence) or not all(isinstance(s, str) for s in specs):
        raise InvalidInputError(
            f"{where}: window {value!r}: expected a string such as "
            "'22:00-06:00 Europe/Berlin' or a list of them"
        )
    Windows.parse(list(specs))
    return list(specs)
