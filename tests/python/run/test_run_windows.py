"""Run windows and budgets: DST-exact windows, the claim check, bad input named."""

from __future__ import annotations

import datetime as dt

import pytest

from backfill.errors import InvalidInputError
from backfill.run.ledger import TaskRow
from backfill.run.limits import RunLimits
from backfill.windows import Windows, parse_duration

UTC = dt.timezone.utc


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def task(partitions: int = 1) -> TaskRow:
    return TaskRow(0, "m", None, None, "p0", partitions, 0, "pending", 0, None, None, None)


@pytest.mark.parametrize(
    "night, opens, closes, hours",
    [
        ("2026-10-24", "2026-10-24T20:00", "2026-10-25T05:00", 9),  # clocks fall back: 9 hours
        ("2026-10-25", "2026-10-25T21:00", "2026-10-26T05:00", 8),
        ("2026-03-28", "2026-03-28T21:00", "2026-03-29T04:00", 7),  # clocks spring forward
        ("2026-03-29", "2026-03-29T20:00", "2026-03-30T04:00", 8),
    ],
)
def test_a_night_window_is_exact_across_dst(
    night: str, opens: str, closes: str, hours: int
) -> None:
    (w,) = Windows.parse("22:00-06:00 Europe/Berlin").windows
    got = w.instants(dt.date.fromisoformat(night))
    assert got == (at(opens), at(closes)) and got[1] - got[0] == dt.timedelta(hours=hours)


def test_claims_fit_only_inside_the_window_across_the_october_change() -> None:
    limits = RunLimits.from_options({"windows": ["22:00-06:00 Europe/Berlin"]})
    per = {"m": 3 * 3600.0}  # 3 h a partition
    starts, now = [], at("2026-10-24T12:00")
    while len(starts) < 6:
        if limits.held_back(task(), per, 0.0, now) is None:
            starts.append(now)
            now += dt.timedelta(hours=3)
        else:
            assert limits.windows is not None
            now = limits.windows.next_open(now + dt.timedelta(seconds=1))
    # The 9-hour fall-back night holds three 3-hour tasks; the next 8-hour night only two.
    assert starts == [
        at("2026-10-24T20:00"),
        at("2026-10-24T23:00"),
        at("2026-10-25T02:00"),
        at("2026-10-25T21:00"),
        at("2026-10-26T00:00"),
        at("2026-10-26T21:00"),
    ]


def test_waiting_note_names_the_opening_in_the_zone() -> None:
    limits = RunLimits.from_options({"windows": ["22:00-06:00 Europe/Berlin"]})
    assert limits.waiting_note(at("2026-11-02T12:00")) == "waiting for window, opens 22:00 CET"
    assert limits.waiting_note(at("2026-11-02T22:00")) is None


def test_budget_stops_a_task_that_would_exceed_it_and_refuses_a_plan_over_it() -> None:
    limits = RunLimits.from_options({"budget_seconds": parse_duration("3h")})
    per = {"m": 3600.0}
    assert limits.held_back(task(), per, 2 * 3600.0, at("2026-01-01T00:00")) is None
    assert limits.held_back(task(), per, 2 * 3600.0 + 1, at("2026-01-01T00:00")) == "budget"
    with pytest.raises(
        InvalidInputError, match="4h 00m of engine time, exceeds the budget of 3h 00m"
    ):
        limits.refuse_over_budget(4 * 3600.0, None)
    limits.refuse_over_budget(4 * 3600.0, "quarter close needs it")  # forced with a reason


@pytest.mark.parametrize(
    "specs, message",
    [
        (["22:00-22:00 UTC"], "window '22:00-22:00 UTC' is empty"),
        (
            ["22:00-06:00 Mars/Base"],
            "window '22:00-06:00 Mars/Base': unknown time zone 'Mars/Base'",
        ),
        (["22:00-06:00 UTC", "05:00-07:00 UTC"], "'22:00-06:00 UTC' and '05:00-07:00 UTC' overlap"),
        (["Sat-Sun 00:00-24:00 UTC", "Fri 22:00-02:00 UTC"], "overlap"),
        (["Sat-Foo 00:00-24:00 UTC"], "days 'Sat-Foo' are not weekdays"),
        (["10:00-12:00"], "names no time zone"),
        ([], "expected at least one"),
    ],
)
def test_bad_windows_are_named(specs: list[str], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Windows.parse(specs)


@pytest.mark.parametrize("text", ["3 hours", "x", "0", "-3h", ""])
def test_a_budget_that_is_not_a_duration_is_named(text: str) -> None:
    with pytest.raises(InvalidInputError, match=f"budget {text!r}"):
        parse_duration(text)
