"""The machine time of tasks that ran side by side on one machine's cores.

An embedded engine (DuckDB) runs every task of a backfill in this process: two tasks at once
each get about half of the cores, so each takes about twice as long as it would alone. An
attempt's wall time then says as much about what ran beside it as about its own work, and a fit
of wall times overestimates whatever ran beside others (a small task that shared the machine
throughout looks as slow as a large one that ran alone at the end). The machine time of an
attempt is its share of the machine: each instant of its run divided among the attempts running
then, ``∫ dt / n(t)``. The machine times of the attempts of a run add up to the time the machine
was busy, whatever the concurrency was, and a plan on such an engine is estimated from the sum
of its tasks' machine times (:attr:`backfill.plan.Estimate.shared_machine`).

>>> machine_times([(0.0, 2.0), (0.0, 6.0)])  # 2 s side by side, then 4 s alone
[1.0, 5.0]
>>> machine_times([(0.0, 1.0), (1.0, 2.0)])  # one after the other: their wall times
[1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["machine_times"]


def machine_times(intervals: Sequence[tuple[float, float]]) -> list[float]:
    """Per interval ``(start, end)`` (seconds on one clock), its share of the machine: each
    instant of it divided by the number of intervals covering that instant. An empty or
    reversed interval has none. O(n log n + n·k) for n intervals of which at most k overlap."""
    bounds: list[tuple[float, int, int]] = []  # (time, 0 = end before 1 = start, index)
    for i, (start, end) in enumerate(intervals):
        if end > start:
            bounds += [(start, 1, i), (end, 0, i)]
    bounds.sort()
    out = [0.0] * len(intervals)
    active: set[int] = set()
    last = 0.0
    for when, is_start, i in bounds:
        if active and when > last:
            share = (when - last) / len(active)
            for j in active:
                out[j] += share
        last = when
        if is_start:
            active.add(i)
        else:
            active.discard(i)
    return out
