"""A straightforward Python backfill planner (networkx + plain datetime arithmetic).

It is the competitor in ``plan_bench.py`` and the oracle in ``tests/python/plan/test_plan.py``: the
same semantics as the C++ planner, written the obvious way, in UTC. It walks partitions as
``datetime`` pairs, finds parent tasks by bisecting their start times, and keeps everything in
Python objects.
"""

from __future__ import annotations

import bisect
import dataclasses
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
    planner = _ReferencePlanner(models, start, end, as_of, propagate, partitions_per_run)
    return planner.plan([n for n in order if n in chosen])


@dataclasses.dataclass
class _ReferencePlanner:
    """The two passes of :func:`plan_reference`: the partitions of each chosen model (parents
    first), then its tasks and their dependencies on the parents' tasks."""

    models: dict[str, dict[str, Any]]
    start: dt.datetime
    end: dt.datetime
    as_of: dt.datetime
    propagate: str
    partitions_per_run: int
    sets: dict[str, list[Part]] = dataclasses.field(default_factory=dict)
    tasks: list[Task] = dataclasses.field(default_factory=list)
    deps: list[list[int]] = dataclasses.field(default_factory=list)
    spans: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    starts: dict[str, list[dt.datetime]] = dataclasses.field(default_factory=dict)

    def plan(self, order: list[str]) -> tuple[list[Task], list[list[int]]]:
        for name in order:
            self.sets[name] = self._partitions(name)
        for name in order:
            self._add_tasks(name)
        return self.tasks, self.deps

    # -- pass 1: partitions -------------------------------------------------------------------
    def _partitions(self, name: str) -> list[Part]:
        m = self.models[name]
        grain = m["grain"]
        if grain is None:
            return [(dt.datetime.min.replace(tzinfo=UTC), dt.datetime.max.replace(tzinfo=UTC))]
        low = floor(m["begin"], grain) if m["begin"] else None

        def ok(p: Part) -> bool:
            return (low is None or p[0] >= low) and p[1] <= self.as_of

        wanted = {p for p in covering(grain, self.start, self.end) if ok(p)}
        if self.propagate == "impact":
            for dependency in m["depends_on"]:
                wanted.update(p for p in self._impacted(grain, low, dependency) if ok(p))
        return sorted(wanted)

    def _impacted(
        self, grain: str, low: dt.datetime | None, dependency: tuple[str, str, int, int]
    ) -> list[Part]:
        """The child's partitions (of ``grain``) that the parent's planned partitions touch."""
        parent, mapping, a, b = dependency
        if not self.sets.get(parent):
            return []
        if mapping == "all" or self.models[parent]["grain"] is None:
            lo = low if low is not None else floor(self.start, grain)
            return covering(grain, lo, self.as_of)
        out: list[Part] = []
        for ps, pe in self.sets[parent]:
            touched = covering(grain, ps, pe)
            if mapping == "window":
                first = step(touched[0][0], grain, -b)
                last_end = step(touched[-1][0], grain, -a + 1)
                touched = covering(grain, first, last_end)
            out.extend(touched)
        return out

    # -- pass 2: tasks ------------------------------------------------------------------------
    def _runs(self, name: str) -> list[tuple[dt.datetime | None, dt.datetime | None, int]]:
        """(start, end, partitions) per task: up to partitions_per_run adjacent partitions."""
        parts = self.sets[name]
        if self.models[name]["grain"] is None:
            return [(None, None, 1)]
        runs: list[tuple[dt.datetime | None, dt.datetime | None, int]] = []
        i = 0
        while i < len(parts):
            j = i + 1
            while (
                j < len(parts)
                and j - i < self.partitions_per_run
                and parts[j][0] == parts[j - 1][1]
            ):
                j += 1
            runs.append((parts[i][0], parts[j - 1][1], j - i))
            i = j
        return runs

    def _add_tasks(self, name: str) -> None:
        first_id = len(self.tasks)
        for s, e, n in self._runs(name):
            my_deps: list[int] = []
            for dependency in self.models[name]["depends_on"]:
                my_deps.extend(self._parent_tasks(name, s, e, dependency))
            self.tasks.append((name, s, e, n))
            self.deps.append(sorted(my_deps))
        self.spans[name] = (first_id, len(self.tasks))
        self.starts[name] = [t[1] for t in self.tasks[first_id:]]  # type: ignore[misc]

    def _parent_tasks(
        self,
        name: str,
        s: dt.datetime | None,
        e: dt.datetime | None,
        dependency: tuple[str, str, int, int],
    ) -> list[int]:
        """The ids of the parent's tasks that the task [s, e) of ``name`` reads."""
        parent, mapping, a, b = dependency
        if parent not in self.spans:
            return []
        p0, p1 = self.spans[parent]
        if p0 == p1:
            return []
        grain = self.models[name]["grain"]
        if grain is None or self.models[parent]["grain"] is None or mapping == "all":
            return list(range(p0, p1))
        assert s is not None and e is not None
        lo, hi = s, e
        if mapping == "window":
            lo = step(s, grain, a)
            hi = step(step(e, grain, -1), grain, b + 1)
        found: list[int] = []
        k = max(p0, p0 + bisect.bisect_right(self.starts[parent], lo) - 1)
        while k < p1 and self.tasks[k][1] < hi:  # type: ignore[operator]
            if self.tasks[k][2] > lo:  # type: ignore[operator]
                found.append(k)
            k += 1
        return found
