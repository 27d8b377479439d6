"""``Project``: the sources and models of a pipeline, their partitioning and dependencies.

>>> p = Project("shop")
>>> p.source("raw.orders", grain="day", event_time="ordered_at", retention="90d")
>>> p.model("clean_orders", depends_on=["raw.orders"], grain="day", event_time="ordered_at")
>>> p.select("clean_orders+")                                      # doctest: +SKIP
['clean_orders']

The graph (validation, topological order, selectors) runs in the C++ core; this module holds the
definitions. Planning over them is the plan stage's (:mod:`backfill.plan.planner`), reached
through :meth:`backfill.Project.plan`.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from .. import _core
from ..checks import check_model
from ..errors import InvalidInputError, NotFoundError
from .landing import source_kind_names

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from ..lint import LintResult
    from .files import ProjectSettings

log = logging.getLogger(__name__)

__all__ = [
    "Dependency",
    "Model",
    "ModelOptions",
    "Project",
    "Source",
    "all_of",
    "check_table_partitions",
    "overlap",
    "window",
]

STRATEGIES = ("replace", "merge", "append", "full", "view")
# The lint speaks dbt's strategy names.
_LINT_STRATEGY = {
    "replace": "delete+insert",
    "merge": "merge",
    "full": "table",
    "append": "append",
    "view": "view",
}
#: Sources the warehouse holds; landing sources (read from outside, e.g. ``kafka``) are the
#: installed kinds of :mod:`backfill.model.landing`.
SOURCE_KINDS = ("raw", "external")
MappingKind = Literal["overlap", "window", "all"]


@dataclass(frozen=True)
class Dependency:
    """A parent with a partition mapping: ``overlap`` (default), ``window`` or ``all``."""

    parent: str
    mapping: MappingKind = "overlap"
    start: int = 0  # window offsets, in the child's grain; end inclusive
    end: int = 0

    def __str__(self) -> str:
        if self.mapping == "window":
            return f"window({self.parent!r}, {self.start}, {self.end})"
        return self.parent if self.mapping == "overlap" else f"all_of({self.parent!r})"


def overlap(parent: str) -> Dependency:
    """Each child partition reads every parent partition overlapping it (the default)."""
    return Dependency(parent, "overlap")


def window(parent: str, start: int, end: int) -> Dependency:
    """Child partition ``c`` reads the parent over child partitions ``c+start .. c+end``.

    ``window("fct_daily_sales", -6, 0)`` is a 7-day rolling read.
    """
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(f"window {name} offset {value!r} is not an integer")
    if start > end:
        raise InvalidInputError(
            f"window({parent!r}, {start}, {end}): start {start} is after end {end}; "
            "expected start <= end"
        )
    return Dependency(parent, "window", start, end)


def all_of(parent: str) -> Dependency:
    """Every child partition reads the whole parent (a dimension, a lookup table)."""
    return Dependency(parent, "all")


class ModelOptions(TypedDict, total=False):
    """What :meth:`Project.model` takes beside the name (each optional)."""

    depends_on: Iterable[str | Dependency]  # parents: names, or overlap/window/all_of
    grain: str | None  # None: unpartitioned
    tz: str  # the grain's time zone (default UTC)
    begin: dt.datetime | dt.date | str | None  # its first partition
    strategy: str | None  # replace (partitioned default), merge, append, full, view
    event_time: str | None  # the column partitions are cut on
    unique_key: str | Iterable[str] | None  # needed by merge
    tags: Iterable[str]
    sql: str | None
    meta: Mapping[str, Any] | None
    #: the grain of the published table's partitions (a declaratively partitioned table on
    #: engines that have them: PostgreSQL); None: one plain table
    table_partitions: str | None


@dataclass(frozen=True)
class Source:
    name: str
    grain: str | None = None
    tz: str = "UTC"
    event_time: str | None = None
    retention: dt.timedelta | None = None
    kind: str = "raw"
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Model:
    name: str
    depends_on: tuple[Dependency, ...] = ()
    grain: str | None = None
    tz: str = "UTC"
    begin: dt.datetime | None = None
    strategy: str = "replace"
    event_time: str | None = None
    unique_key: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    sql: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: the grain of the table's partitions (see :func:`check_table_partitions`)
    table_partitions: str | None = None

    @property
    def parents(self) -> list[str]:
        return [d.parent for d in self.depends_on]


_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _retention(value: str | dt.timedelta | None, source: str) -> dt.timedelta | None:
    if value is None or isinstance(value, dt.timedelta):
        if value is not None and value <= dt.timedelta(0):
            raise InvalidInputError(f"source {source!r}: retention {value} is not positive")
        return value
    if isinstance(value, str) and (m := _DURATION.match(value)) and int(m.group(1)) > 0:
        return dt.timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])
    raise InvalidInputError(
        f"source {source!r}: retention {value!r} is not a duration; expected e.g. '7d', '90d', "
        "'12h', a timedelta, or None (kept forever)"
    )


def _dependency(item: str | Dependency, model: str) -> Dependency:
    if isinstance(item, Dependency):
        return item
    if isinstance(item, str):
        return Dependency(item)
    raise InvalidInputError(
        f"model {model!r}: dependency {item!r} is not a name or a mapping "
        "(backfill.overlap / window / all_of)"
    )


def _check_grain(grain: str | None, tz: str, what: str) -> None:
    if grain is None:
        return
    try:
        _core.check_grain(grain)
        _core.check_zone(tz)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None


#: grain -> the grains whose periods each lie inside one of its periods (in one time zone):
#: a week crosses month boundaries, so weeks nest in nothing coarser than a week
_NESTS_IN: dict[str, tuple[str, ...]] = {
    "hour": ("hour", "day", "week", "month", "quarter", "year"),
    "day": ("day", "week", "month", "quarter", "year"),
    "week": ("week",),
    "month": ("month", "quarter", "year"),
    "quarter": ("quarter", "year"),
    "year": ("year",),
}


def check_table_partitions(
    what: str, value: object, grain: str | None, strategy: str, event_time: str | None
) -> None:
    """Checks ``table_partitions`` (the grain of a model's table partitions): a grain whose
    periods are whole periods of the model's ``grain`` (each task period lies inside one table
    partition; the model's time zone cuts both), of a ``replace`` model with an event time.
    Raises InvalidInputError naming the bad value and what was expected."""
    if not isinstance(value, str) or value not in _NESTS_IN:
        raise InvalidInputError(
            f"{what}: table_partitions {value!r} is not a grain; expected one of "
            f"{', '.join(_NESTS_IN)}"
        )
    if grain is None:
        raise InvalidInputError(
            f"{what}: table_partitions {value!r} needs a partitioned model (grain and "
            "event_time): an unpartitioned model's table has no periods to cut"
        )
    if value not in _NESTS_IN[grain]:
        raise InvalidInputError(
            f"{what}: table_partitions {value!r} does not hold whole {grain} periods; "
            f"expected one of {', '.join(_NESTS_IN[grain])} (a table partition holds whole "
            "periods of the model's grain)"
        )
    if strategy != "replace":
        raise InvalidInputError(
            f"{what}: table_partitions needs strategy 'replace', not {strategy!r}: a "
            "partition is published by exchanging it whole, which a replace of its periods "
            "allows; a merge upserts keys across periods"
        )
    if not event_time:
        raise InvalidInputError(
            f"{what}: table_partitions {value!r} needs event_time (the column the table's "
            "partitions are cut on)"
        )


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise InvalidInputError(f"{what} name {name!r} must be a non-empty string without spaces")
    return name


def _to_datetime(value: dt.datetime | dt.date | str, tz: str, what: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise InvalidInputError(f"{what} {value!r} is naive; pass a tz-aware datetime")
        return value
    if isinstance(value, str):
        return _core.parse_instant(value, tz)
    if isinstance(value, dt.date):
        return _core.parse_instant(value.isoformat(), tz)
    raise InvalidInputError(f"{what} {value!r} is not a date, datetime or ISO string")


class Project:
    """Sources and models of a pipeline: their definitions, graph and selection."""

    #: Whether the project's own runs rebuild the partition still in progress when asked for a
    #: period reaching it (dbt's microbatch runs do): plans then include it by default
    #: (:class:`backfill.plan.planner.PlanOptions`).
    runs_in_progress: bool = False

    def __init__(self, name: str = "project") -> None:
        self.name = name
        self._nodes: dict[str, Source | Model] = {}
        self._graph: _core.Graph | None = None
        self.settings: ProjectSettings | None = None  # set by Project.load (files, engine, state)

    # -- definition ----------------------------------------------------------------------------
    def source(
        self,
        name: str,
        *,
        grain: str | None = None,
        tz: str = "UTC",
        event_time: str | None = None,
        retention: str | dt.timedelta | None = None,
        kind: str = "raw",
        meta: Mapping[str, Any] | None = None,
    ) -> Source:
        """Declares a source (``raw.orders``), partitioned by event time when ``grain`` is set.

        ``retention`` ("7d", "90d", a timedelta; None = kept forever) says how far back it can
        be replayed; ``kind`` is ``raw``, ``external`` or an installed landing source kind
        (``kafka``).
        """
        _check_name(name, "source")
        kinds = (*SOURCE_KINDS, *source_kind_names())
        if kind not in kinds:
            raise InvalidInputError(
                f"source {name!r}: unknown kind {kind!r}; expected one of {', '.join(kinds)}"
            )
        _check_grain(grain, tz, f"source {name!r}")
        src = Source(
            name, grain, tz, event_time, _retention(retention, name), kind, dict(meta or {})
        )
        self._add(src)
        return src

    def model(self, name: str, **options: Unpack[ModelOptions]) -> Model:
        """Declares a model; ``options`` are those of :class:`ModelOptions`. ``grain=None``
        makes it unpartitioned (default strategy ``full``); partitioned models default to
        ``replace`` (delete + insert the period)."""
        _check_name(name, "model")
        unknown = sorted(set(options) - set(ModelOptions.__annotations__))
        if unknown:
            raise TypeError(f"Project.model() got unexpected keyword argument(s) {unknown}")
        grain, tz, begin = options.get("grain"), options.get("tz", "UTC"), options.get("begin")
        strategy = options.get("strategy") or ("replace" if grain else "full")
        if strategy not in STRATEGIES:
            raise InvalidInputError(
                f"model {name!r}: unknown strategy {strategy!r}; expected one of "
                f"{', '.join(STRATEGIES)}"
            )
        unique_key = options.get("unique_key")
        keys = (unique_key,) if isinstance(unique_key, str) else tuple(unique_key or ())
        if strategy == "merge" and not keys:
            raise InvalidInputError(f"model {name!r}: strategy 'merge' needs a unique_key")
        _check_grain(grain, tz, f"model {name!r}")
        if begin is not None and grain is None:
            raise InvalidInputError(f"model {name!r}: begin is set but the model has no grain")
        deps = tuple(_dependency(d, name) for d in options.get("depends_on", ()))
        tags = options.get("tags", ())
        table_partitions = options.get("table_partitions")
        if table_partitions is not None:
            check_table_partitions(
                f"model {name!r}", table_partitions, grain, strategy, options.get("event_time")
            )
        model = Model(
            name=name,
            depends_on=deps,
            grain=grain,
            tz=tz,
            begin=None if begin is None else _to_datetime(begin, tz, f"model {name!r} begin"),
            strategy=strategy,
            event_time=options.get("event_time"),
            unique_key=keys,
            tags=(tags,) if isinstance(tags, str) else tuple(tags),
            sql=options.get("sql"),
            meta=dict(options.get("meta") or {}),
            table_partitions=table_partitions,
        )
        self._add(model)
        return model

    def _add(self, node: Source | Model) -> None:
        if node.name in self._nodes:
            kind = "source" if isinstance(self._nodes[node.name], Source) else "model"
            raise InvalidInputError(f"duplicate name {node.name!r}: a {kind} of that name exists")
        self._nodes[node.name] = node
        self._graph = None

    # -- inspection ----------------------------------------------------------------------------
    @property
    def models(self) -> dict[str, Model]:
        """Models by name, in declaration order."""
        return {n: m for n, m in self._nodes.items() if isinstance(m, Model)}

    @property
    def nodes(self) -> dict[str, Source | Model]:
        """Sources and models by name, in declaration order."""
        return dict(self._nodes)

    @property
    def sources(self) -> dict[str, Source]:
        return {n: s for n, s in self._nodes.items() if isinstance(s, Source)}

    def __getitem__(self, name: str) -> Source | Model:
        try:
            return self._nodes[name]
        except KeyError:
            raise NotFoundError(f"no source or model named {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        return f"Project({self.name!r}: {len(self.sources)} sources, {len(self.models)} models)"

    @property
    def graph(self) -> _core.Graph:
        """The validated C++ graph (built on first use; raises on unknown parents, cycles...)."""
        if self._graph is None:
            self._graph = _core.Graph([self._node_dict(n) for n in self._nodes.values()])
        return self._graph

    def validate(self) -> None:
        """Raises if the graph is invalid (unknown parent, cycle, bad window...)."""
        _ = self.graph

    @staticmethod
    def _node_dict(node: Source | Model) -> dict[str, Any]:
        if isinstance(node, Source):
            return {
                "name": node.name,
                "kind": "source",
                "grain": node.grain,
                "tz": node.tz,
                "source_kind": node.kind,
                "retention": None
                if node.retention is None
                else int(node.retention.total_seconds()),
                "event_time": node.event_time,
            }
        return {
            "name": node.name,
            "kind": "model",
            "grain": node.grain,
            "tz": node.tz,
            "begin": node.begin,
            "strategy": node.strategy,
            "event_time": node.event_time,
            "tags": list(node.tags),
            "depends_on": [(d.parent, d.mapping, d.start, d.end) for d in node.depends_on],
        }

    def topological_order(self, *, include_sources: bool = False) -> list[str]:
        """Models (and sources if asked), parents first; ties in declaration order."""
        order: list[str] = self.graph.topological_order()
        return order if include_sources else [n for n in order if isinstance(self._nodes[n], Model)]

    def upstream(self, name: str, depth: int | None = None) -> list[str]:
        """Ancestors of ``name`` (sources included) in topological order; ``depth`` limits edges."""
        return list(self.graph.upstream(name, -1 if depth is None else _depth(depth)))

    def downstream(self, name: str, depth: int | None = None) -> list[str]:
        """Descendants of ``name`` in topological order; ``depth`` limits edges."""
        return list(self.graph.downstream(name, -1 if depth is None else _depth(depth)))

    def parents(self, name: str) -> list[tuple[str, str]]:
        """(parent, mapping) pairs of ``name``, e.g. ``("fct_daily_sales", "window(-6, 0)")``."""
        return [tuple(x) for x in self.graph.parents(name)]  # type: ignore[misc]

    def check(self, model: str, *, dialect: str = "duckdb") -> LintResult:
        """Static checks of one model, before anything runs: its write strategy (``append``
        doubles data when re-run) and the lint findings on its SQL (clock reads,
        nondeterminism, reads of a partitioned parent not restricted to the run's period).
        Suppressions in the SQL (``-- backfill: ignore CODE reason``) are honoured."""
        m = self.models.get(model) if isinstance(model, str) else None
        if m is None:
            raise NotFoundError(f"model {model!r} is not in project {self.name!r}")
        parents = [d.parent for d in m.depends_on]
        files = self.settings.files if self.settings else {}
        return check_model(
            sql=m.sql or "",
            strategy=_LINT_STRATEGY.get(m.strategy),
            dialect=dialect,
            partitioned_inputs=sorted({*parents, *(p.split(".")[-1] for p in parents)}),
            path=str(files[model]) if model in files else None,
        )

    def select(self, select: str, exclude: str | None = None) -> list[str]:
        """Model names matching a dbt selector (``fct_daily_sales+``, ``tag:daily``, ``@x``,
        ``2+x``, ``fct_*``; space = union, comma = intersection), in topological order."""
        if not isinstance(select, str):
            raise InvalidInputError(f"selector {select!r} is not a string")
        return list(self.graph.select(select, exclude or ""))


def _depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidInputError(f"depth {depth!r} is not a positive integer")
    return depth
