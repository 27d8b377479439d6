"""The machine time of attempts that ran side by side (backfill.run.machine_time), against a
plain oracle: the same integral summed over a fine grid of instants."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from backfill.run.machine_time import machine_times

# Whole tenths of a second on [0, 10]: a grid of tenths is then exact for the oracle.
tenths = st.integers(min_value=0, max_value=100)
spans = st.lists(st.tuples(tenths, tenths), max_size=12)


def oracle(intervals: list[tuple[int, int]]) -> list[float]:
    """Per interval of tenths, each tenth it covers divided by the intervals covering it."""
    out = [0.0] * len(intervals)
    for t in range(100):
        covering = [i for i, (a, b) in enumerate(intervals) if a <= t < b]
        for i in covering:
            out[i] += 0.1 / len(covering)
    return out


@settings(max_examples=300, deadline=None)
@given(spans)
def test_equals_the_grid_oracle(intervals: list[tuple[int, int]]) -> None:
    got = machine_times([(a / 10, b / 10) for a, b in intervals])
    assert all(
        math.isclose(g, w, abs_tol=1e-9) for g, w in zip(got, oracle(intervals), strict=True)
    )


@settings(max_examples=300, deadline=None)
@given(spans)
def test_the_shares_add_up_to_the_time_the_machine_was_busy(
    intervals: list[tuple[int, int]],
) -> None:
    busy = sum(1 for t in range(100) if any(a <= t < b for a, b in intervals)) / 10
    assert math.isclose(
        sum(machine_times([(a / 10, b / 10) for a, b in intervals])), busy, abs_tol=1e-9
    )


def test_alone_an_attempt_keeps_its_wall_time_and_side_by_side_shares_it() -> None:
    assert machine_times([(5.0, 7.5)]) == [2.5]
    assert machine_times([(0.0, 4.0), (0.0, 4.0)]) == [2.0, 2.0]
    # a small task that shared the machine throughout, a large one alone at the end
    assert machine_times([(0.0, 2.0), (0.0, 6.0), (7.0, 7.0), (3.0, 1.0)]) == [1.0, 5.0, 0, 0]
