"""The ``Engine`` interface: what the runner (and the audit) need from a warehouse.

An engine writes one task's period of one model into a target (the published tables, or the
backfill's audit area that readers of the published tables never see), atomically and
idempotently, and fingerprints partitions in place so that an audit moves only the partitions
that differ. The DuckDB engine is the embedded default; a Spark engine implements the same calls.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import BackfillError

if TYPE_CHECKING:  # pragma: no cover
    from .._arrow import ArrowTable
    from ..project import Project

__all__ = ["Area", "Engine", "PartitionFingerprint", "TaskFailure", "WriteResult"]

Period = tuple[dt.datetime, dt.datetime]


class TaskFailure(BackfillError):
    """A task failed. ``transient`` failures (a lock, a write conflict) are worth retrying;
    others (a SQL error, rows outside the period) fail the same way every time."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class Area:
    """Where a backfill writes and what it rebuilds.

    ``backfill_id=None`` writes straight into the published tables (an initial build). Otherwise
    writes go to the backfill's audit area, and ``ref()`` to a model in ``periods`` reads the new
    version for those periods and the published version elsewhere.
    """

    backfill_id: str | None
    periods: Mapping[str, Sequence[Period]] = field(default_factory=dict)

    @property
    def direct(self) -> bool:
        return self.backfill_id is None


@dataclass(frozen=True)
class WriteResult:
    rows_written: int
    rows_deleted: int
    fingerprint: str  # in-engine fingerprint of the written period: "<rows>:<digest hex>"
    seconds: float
    conflicts_retried: int = 0


@dataclass(frozen=True)
class PartitionFingerprint:
    """In-engine fingerprint of one partition (row count and an order-independent digest)."""

    label: str
    rows: int
    digest: str


class Engine(ABC):
    """A warehouse the runner writes into. Implementations must be safe to call from threads."""

    name: str = "engine"

    @abstractmethod
    def run_task(self, project: Project, model: str, start: dt.datetime | None,
                 end: dt.datetime | None, area: Area) -> WriteResult:
        """Builds ``model`` for [start, end) (None: the whole model) into ``area`` in one
        transaction: ``replace`` deletes and inserts the period, ``merge`` upserts on the unique
        key, ``full`` rebuilds. Running it twice leaves the same table. Raises TaskFailure."""

    @abstractmethod
    def render(self, project: Project, model: str, start: dt.datetime | None,
               end: dt.datetime | None, area: Area) -> str:
        """The model's SELECT for the period, with ref()/source()/this resolved for ``area``."""

    @abstractmethod
    def relation(self, model: str, area: Area) -> str:
        """The quoted table name ``model`` is written to in ``area``."""

    @abstractmethod
    def partition_fingerprints(self, project: Project, model: str, area: Area,
                               partitions: Sequence[tuple[str, dt.datetime, dt.datetime]],
                               ) -> list[PartitionFingerprint]:
        """Fingerprints of ``model`` in ``area`` per (label, start, end) partition, computed in
        the engine (no data moves). Missing tables or partitions give rows=0."""

    @abstractmethod
    def read(self, project: Project, model: str, area: Area,
             periods: Sequence[Period] | None = None) -> ArrowTable:
        """The rows of ``model`` in ``area`` (only ``periods`` when given) as an Arrow table:
        what the audit pulls into the C++ diff for the partitions whose fingerprints differ."""

    @abstractmethod
    def drop_area(self, backfill_id: str) -> None:
        """Drops a backfill's audit area (discard)."""

    def close(self) -> None:  # noqa: B027 - optional
        """Releases connections (engines may hold none between tasks)."""
