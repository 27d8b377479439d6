"""The partition calendar against an independent zoneinfo oracle, plus fixed DST cases and
errors."""

from __future__ import annotations

import datetime as dt
import pickle
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backfill
from tz_oracle import hour_bounds, hour_label, period_bounds, period_label

UTC = dt.timezone.utc
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Sao_Paulo",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "America/Santiago",
    "Asia/Beirut",
]
T_2000 = int(dt.datetime(2000, 1, 1, tzinfo=UTC).timestamp())
T_2041 = int(dt.datetime(2041, 1, 1, tzinfo=UTC).timestamp())
instants = st.integers(min_value=T_2000, max_value=T_2041 - 1)


def at(t: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, UTC)


@pytest.mark.parametrize("tz", ZONES)
@pytest.mark.parametrize("grain", ["day", "week", "month", "quarter", "year"])
@settings(max_examples=40)
@given(t=instants)
def test_periods_agree_with_zoneinfo(tz: str, grain: str, t: int) -> None:
    zone = ZoneInfo(tz)
    start, end, first = period_bounds(t, grain, zone)
    p = backfill.partition_of(at(t), grain, tz)
    assert (p.start_epoch, p.end_epoch) == (start, end)
    assert p.label == period_label(first, grain)
    nxt = p.next()
    n_start, n_end, n_first = period_bounds(end, grain, zone)
    assert (nxt.start_epoch, nxt.end_epoch, nxt.label) == (
        n_start,
        n_end,
        period_label(n_first, grain),
    )
    assert nxt.prev() == p


@pytest.mark.parametrize("tz", ZONES)
@settings(max_examples=60)
@given(t=instants)
def test_hours_agree_with_zoneinfo(tz: str, t: int) -> None:
    zone = ZoneInfo(tz)
    start, end = hour_bounds(t, zone)
    p = backfill.partition_of(at(t), "hour", tz)
    assert (p.start_epoch, p.end_epoch) == (start, end)
    assert p.label == hour_label(start, zone, utc=tz == "UTC")
    nxt = p.next()
    assert (nxt.start_epoch, nxt.end_epoch) == hour_bounds(end, zone)
    assert nxt.prev() == p


@pytest.mark.parametrize("tz", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"])
def test_every_transition_hour_of_a_year_agrees(tz: str) -> None:
    # Walk a whole year of hours (including 2039, past the last explicit TZif transition).
    zone = ZoneInfo(tz)
    for year in (2026, 2039):
        parts = backfill.partitions(
            "hour", f"{year}-03-01T00:00Z", f"{year}-12-01T00:00Z", tz=tz, align="expand"
        )
        odd = [p for p in parts if p.length_seconds != 3600 or "+" not in p.label[13:] + "+"]
        labels = [p.label for p in parts]
        assert len(labels) == len(set(labels))
        for p in parts[::97] + odd:
            assert (p.start_epoch, p.end_epoch) == hour_bounds(p.start_epoch, zone)


def labels_and_hours(grain: str, start: str, end: str, tz: str) -> list[tuple[str, float]]:
    return [
        (p.label, p.length_seconds / 3600) for p in backfill.partitions(grain, start, end, tz=tz)
    ]


def test_berlin_fall_back_day_is_25_hours_and_has_two_2am_hours() -> None:
    assert labels_and_hours("day", "2026-10-24", "2026-10-27", "Europe/Berlin") == [
        ("2026-10-24", 24),
        ("2026-10-25", 25),
        ("2026-10-26", 24),
    ]
    hours = labels_and_hours("hour", "2026-10-25T01:00", "2026-10-25T04:00", "Europe/Berlin")
    assert [h[0] for h in hours] == [
        "2026-10-25T01+02:00",
        "2026-10-25T02+02:00",
        "2026-10-25T02+01:00",
        "2026-10-25T03+01:00",
    ]


def test_berlin_spring_forward_skips_2am() -> None:
    hours = labels_and_hours("hour", "2026-03-29T00:00", "2026-03-29T04:00", "Europe/Berlin")
    assert [h[0] for h in hours] == [
        "2026-03-29T00+01:00",
        "2026-03-29T01+01:00",
        "2026-03-29T03+02:00",
    ]
    assert labels_and_hours("day", "2026-03-29", "2026-03-30", "Europe/Berlin") == [
        ("2026-03-29", 23)
    ]


def test_midnight_in_a_gap_starts_the_day_when_the_gap_ends() -> None:
    # America/Santiago skipped 2022-09-11 00:00-01:00.
    (p,) = backfill.partitions("day", "2022-09-11", "2022-09-12", tz="America/Santiago")
    assert p.start == dt.datetime(2022, 9, 11, 4, tzinfo=UTC)  # 01:00 -03:00
    assert p.length_seconds == 23 * 3600
    assert p.prev().end == p.start
    # Asia/Beirut skipped midnight at its spring change (e.g. 2010-03-28 00:00 -> 01:00).
    (b,) = backfill.partitions("day", "2010-03-28", "2010-03-29", tz="Asia/Beirut")
    assert b.start == dt.datetime(2010, 3, 27, 22, tzinfo=UTC) and b.length_seconds == 23 * 3600
    with pytest.raises(backfill.InvalidInputError, match="does not exist in America/Santiago"):
        backfill.partitions("hour", "2022-09-11T00:30", "2022-09-11T02:00", tz="America/Santiago")


def test_fall_back_across_midnight_belongs_to_the_later_date() -> None:
    # America/Sao_Paulo 2018-02-18 00:00 -02:00 fell back to 2018-02-17 23:00 -03:00.
    days = labels_and_hours("day", "2018-02-16", "2018-02-19", "America/Sao_Paulo")
    assert days == [("2018-02-16", 24), ("2018-02-17", 25), ("2018-02-18", 24)]
    p = backfill.partition_of("2018-02-18T02:30:00Z", "day", "America/Sao_Paulo")
    assert p.label == "2018-02-17"  # wall clock 23:30 -03:00 in the repeated hour


def test_half_hour_and_45_minute_offsets() -> None:
    p = backfill.partition_of("2026-08-01T00:10:00Z", "hour", "Asia/Kolkata")
    assert (p.label, p.start) == (
        "2026-08-01T05+05:30",
        dt.datetime(2026, 7, 31, 23, 30, tzinfo=UTC),
    )
    d = backfill.partition_of("2026-08-01T00:00:00Z", "day", "Asia/Kathmandu")
    assert (d.label, d.start) == ("2026-08-01", dt.datetime(2026, 7, 31, 18, 15, tzinfo=UTC))
    lh = [
        p
        for p in backfill.partitions(
            "hour",
            "2026-04-04T12:00Z",
            "2026-04-05T18:00Z",
            tz="Australia/Lord_Howe",
            align="expand",
        )
        if p.length_seconds != 3600
    ]
    assert [(p.label, p.length_seconds) for p in lh] == [("2026-04-05T01+10:30", 1800)]


def test_labels_of_every_grain() -> None:
    t = "2026-08-01T05:00:00+02:00"
    got = {g: backfill.partition_of(t, g, "Europe/Berlin").label for g in backfill.GRAINS}
    assert got == {
        "hour": "2026-08-01T05+02:00",
        "day": "2026-08-01",
        "week": "2026-W31",
        "month": "2026-08",
        "quarter": "2026-Q3",
        "year": "2026",
    }
    assert backfill.partition_of("2026-08-01T05:00Z", "hour").label == "2026-08-01T05"
    # ISO week 1 of 2027 starts on Monday 2027-01-04; 2026-12-31 is in 2026-W53.
    assert backfill.partition_of("2026-12-31", "week").label == "2026-W53"
    assert backfill.partition_of("2027-01-04", "week").label == "2027-W01"


def test_partition_value_semantics() -> None:
    a = backfill.partition_of("2026-08-01", "day", "Europe/Berlin")
    b = backfill.partition_of(dt.date(2026, 8, 1), "day", "Europe/Berlin")
    assert a == b and hash(a) == hash(b) and a < a.next() and a.next() > a
    assert len({a, b, a.next()}) == 2
    assert a.contains("2026-08-01T12:00") and not a.contains("2026-08-02T00:00")
    assert pickle.loads(pickle.dumps(a)) == a
    assert str(a) == "2026-08-01" and "Europe/Berlin" in repr(a)
    assert a.start == dt.datetime(2026, 7, 31, 22, tzinfo=UTC) and a.start.tzinfo is not None


def test_strict_and_expand_alignment() -> None:
    with pytest.raises(backfill.InvalidInputError) as err:
        backfill.partitions("month", "2026-08-15", "2026-10-01")
    assert (
        "2026-08-15" in str(err.value)
        and "2026-08-01" in str(err.value)
        and "2026-09-01" in str(err.value)
    )
    got = backfill.partitions("month", "2026-08-15", "2026-10-01T00:00:01Z", align="expand")
    assert [p.label for p in got] == ["2026-08", "2026-09", "2026-10"]
    aware = dt.datetime(2026, 8, 1, tzinfo=ZoneInfo("Europe/Berlin"))
    assert (
        backfill.partitions("day", aware, "2026-08-03", tz="Europe/Berlin")[0].label == "2026-08-01"
    )


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: backfill.partitions("day", "2026-02-30", "2026-03-02"), "2026-02-30"),
        (lambda: backfill.partitions("day", "2026-13-01", "2026-03-02"), "2026-13-01"),
        (
            lambda: backfill.partitions("day", "2026-03-01", "2026-03-02", tz="Mars/Olympus"),
            "Mars/Olympus",
        ),
        (lambda: backfill.partitions("day", "2026-03-05", "2026-03-02"), "2026-03-02"),
        (lambda: backfill.partitions("day", "2026-03-05", "2026-03-05"), "2026-03-05"),
        (lambda: backfill.partitions("fortnight", "2026-03-01", "2026-03-02"), "fortnight"),
        (lambda: backfill.partition_of(dt.datetime(2026, 3, 1), "day"), "2026, 3, 1"),
        (lambda: backfill.partition_of("2026-03-01T25:00", "day"), "2026-03-01T25:00"),
        (lambda: backfill.partition_of("yesterday", "day"), "yesterday"),
        (lambda: backfill.partition_of(12345, "day"), "12345"),
        (lambda: backfill.partitions("day", "2026-03-01", "2026-03-02", align="loose"), "loose"),
        (
            lambda: backfill.partition_of("2026-10-25T02:30", "hour", "Europe/Berlin"),
            "2026-10-25T02:30",
        ),
    ],
)
def test_bad_input_names_the_value(call, named: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(backfill.BackfillError) as err:
        call()
    assert isinstance(err.value, ValueError)
    assert named in str(err.value)


def test_period_set_algebra() -> None:
    ps = backfill.PeriodSet
    a = ps(
        [("2026-08-01", "2026-08-10"), ("2026-08-05", "2026-08-12"), ("2026-08-20", "2026-08-21")]
    )
    assert len(a) == 2 and a.total_seconds == 12 * 86400
    b = ps([("2026-08-11", "2026-08-25")])
    assert [(s.day, e.day) for s, e in (a & b)] == [(11, 12), (20, 21)]
    assert [(s.day, e.day) for s, e in (a - b)] == [(1, 11)]
    assert [(s.day, e.day) for s, e in (a | b)] == [(1, 25)]
    assert (a - a).is_empty() and not (a - a)
    assert a.contains("2026-08-03T10:00Z") and not a.contains("2026-08-15T00:00Z")
    days = a.partitions("day")
    assert len(days) == 12 and days[0].label == "2026-08-01"
    assert [p.label for p in a.partitions("month")] == ["2026-08"]
    assert a.partitions("month", cover="within") == []
    assert backfill.partition_of("2026-08-02", "day") in a


period = st.tuples(st.integers(0, 200), st.integers(0, 200)).map(lambda x: (min(x), max(x)))


@settings(max_examples=200)
@given(st.lists(period, max_size=6), st.lists(period, max_size=6))
def test_period_set_matches_point_sets(
    xs: list[tuple[int, int]], ys: list[tuple[int, int]]
) -> None:
    base = T_2000

    def mk(ivs: list[tuple[int, int]]) -> backfill.PeriodSet:
        return backfill.PeriodSet([(at(base + s), at(base + e)) for s, e in ivs])

    def points(ivs: list[tuple[int, int]]) -> set[int]:
        return {x for s, e in ivs for x in range(s, e)}

    def as_points(p: backfill.PeriodSet) -> set[int]:
        return {
            x for s, e in p for x in range(int(s.timestamp()) - base, int(e.timestamp()) - base)
        }

    a, b = mk(xs), mk(ys)
    assert as_points(a | b) == points(xs) | points(ys)
    assert as_points(a & b) == points(xs) & points(ys)
    assert as_points(a - b) == points(xs) - points(ys)
    # disjoint, non-adjacent: each interval ends before the next one starts
    assert all(end < start for (_, end), (start, _) in pairwise(a))
