"""A straightforward Python backfill planner (networkx + plain datetime arithmetic).

It is the competitor in ``plan_bench.py`` and the oracle in ``tests/python/test_plan.py``: the
same semantics as the C++ planner, written the obvious way, in UTC. It walks partitions as
``datetime`` pairs, finds parent tasks by bisecting their start times, and keeps everything in
Python objects.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Iterable
from typing import Any

import networkx as nx

UTC = dt.timezone.utc
Part = tuple[dt.datetime, dt.datetime]
# A task: (model, start, end, partitions); start/end None for unpartitioned models.
Task = tuple[str, "dt.datetime | None", "dt.datetime | None", int]


def floor(t: dt.datetime, grain: str) -> dt.datetime:
    if grain == "hour":
        return t.replace(minute=0, second=0, microsecond=0)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if grain == "day":
        return day
    if grain == "week":
        return day - dt.timedelta(days=day.weekday())
    if grain == "month":
        return day.replace(day=1)
    if grain == "quarter":
        return day.replace(day=1, month=(day.month - 1) // 3 * 3 + 1)
    if grain == "year":
        return day.replace(day=1, month=1)
    raise ValueError(grain)


def step(t: dt.datetime, grain: str, n: int = 1) -> dt.datetime:
    """The partition start n partitions after the one starting at t."""
    if grain == "hour":
        return t + dt.timedelta(hours=n)
    if grain == "day":
        return t + dt.timedelta(days=n)
    if grain == "week":
        return t + dt.timedelta(weeks=n)
    months = {"month": 1, "quarter": 3, "year": 12}[grain] * n
    m = t.year * 12 + t.month - 1 + months
    return t.replace(year=m // 12, month=m % 12 + 1)


def covering(grain: str, lo: dt.datetime, hi: dt.datetime) -> list[Part]:
    """Partitions of grain overlapping [lo, hi)."""
    out = []
    t = floor(lo, grain)
    while t < hi:
        nxt = step(t, grain)
        out.append((t, nxt))
        t = nxt
    return out


def plan_reference(
    models: dict[str, dict[str, Any]],
    selected: Iterable[str],
    start: dt.datetime,
    end: dt.datetime,
    as_of: dt.datetime,
    *,
    propagate: str = "impact",
    partitions_per_run: int = 1,
) -> tuple[list[Task], list[list[int]]]:
    """``models``: name -> {"grain": str|None, "begin": datetime|None, "depends_on":
    [(parent, "overlap"|"window"|"all", a, b)], "source": bool}. Returns tasks (models in
    topological order, ties by declaration order) and each task's sorted dependency ids."""
    g = nx.DiGraph()
    order_of = {name: i for i, name in enumerate(models)}
    g.add_nodes_from(models)
    for name, m in models.items():
        for parent, *_ in m["depends_on"]:
            g.add_edge(parent, name)
    order = list(nx.lexicographical_topological_sort(g, key=lambda n: order_of[n]))
    chosen = {n for n in selected if not models[n].get("source")}

    sets: dict[str, list[Part]] = {}
    for name in order:
        if name not in chosen:
            continue
        m = models[name]
        grain = m["grain"]
        if grain is None:
            sets[name] = [
                (dt.datetime.min.replace(tzinfo=UTC), dt.datetime.max.replace(tzinfo=UTC))
            ]
            continue
        low = floor(m["begin"], grain) if m["begin"] else None

        def ok(p: Part, low: dt.datetime | None = low) -> bool:
            return (low is None or p[0] >= low) and p[1] <= as_of

        wanted = set(p for p in covering(grain, start, end) if ok(p))
        if propagate == "impact":
            for parent, mapping, a, b in m["depends_on"]:
                if parent not in sets or not sets[parent]:
                    continue
                pgrain = models[parent]["grain"]
                if mapping == "all" or pgrain is None:
                    lo = low if low is not None else floor(start, grain)
                    wanted.update(p for p in covering(grain, lo, as_of) if ok(p))
                    continue
                for ps, pe in sets[parent]:
                    touched = covering(grain, ps, pe)
                    if mapping == "window":
                        first = step(touched[0][0], grain, -b)
                        last_end = step(touched[-1][0], grain, -a + 1)
                        touched = covering(grain, first, last_end)
                    wanted.update(p for p in touched if ok(p))
        sets[name] = sorted(wanted)

    tasks: list[Task] = []
    deps: list[list[int]] = []
    spans: dict[str, tuple[int, int]] = {}
    starts: dict[str, list[dt.datetime]] = {}
    for name in order:
        if name not in chosen:
            continue
        m = models[name]
        first_id = len(tasks)
        parts = sets[name]
        if m["grain"] is None:
            runs = [(None, None, 1)]
        else:
            runs = []
            i = 0
            while i < len(parts):
                j = i + 1
                while (
                    j < len(parts) and j - i < partitions_per_run and parts[j][0] == parts[j - 1][1]
                ):
                    j += 1
                runs.append((parts[i][0], parts[j - 1][1], j - i))
                i = j
        for s, e, n in runs:
            my_deps: list[int] = []
            for parent, mapping, a, b in m["depends_on"]:
                if parent not in spans:
                    continue
                p0, p1 = spans[parent]
                if p0 == p1:
                    continue
                if m["grain"] is None or models[parent]["grain"] is None or mapping == "all":
                    my_deps.extend(range(p0, p1))
                    continue
                assert s is not None and e is not None
                lo, hi = s, e
                if mapping == "window":
                    lo = step(s, m["grain"], a)
                    hi = step(step(e, m["grain"], -1), m["grain"], b + 1)
                pstarts = starts[parent]
                k = max(p0, p0 + bisect.bisect_right(pstarts, lo) - 1)
                while k < p1 and tasks[k][1] < hi:  # type: ignore[operator]
                    if tasks[k][2] > lo:  # type: ignore[operator]
                        my_deps.append(k)
                    k += 1
            tasks.append((name, s, e, n))
            deps.append(sorted(my_deps))
        spans[name] = (first_id, len(tasks))
        starts[name] = [t[1] for t in tasks[first_id:]]  # type: ignore[misc]
    return tasks, deps
