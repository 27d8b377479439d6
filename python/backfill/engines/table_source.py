"""The :class:`TableSource` interface: one table of a warehouse, read in one snapshot (see
:mod:`.locations`, which opens one from a location, and each engine's ``table_source``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from .base import Column
from .sql.dialect import Dialect

__all__ = ["TableSource"]


class TableSource(ABC):
    """One table, read in one snapshot, until :meth:`close`."""

    #: the location as given, secrets masked
    location: str
    #: how this source's reads are kept consistent (said in a diff's result)
    snapshot: str
    dialect: Dialect
    #: the table as a FROM item (a quoted name, or a table function)
    relation: str
    columns: list[Column]
    #: differing partitions streamed per query (None: all in one query); a warehouse whose
    #: driver collects a query's rows whole (Spark) reads a few partitions at a time
    stream_periods: int | None = None

    @abstractmethod
    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a (small) query."""

    @abstractmethod
    def arrow(self, sql: str) -> Any:
        """The result of a query as a pyarrow Table."""

    def unique(self, key: Sequence[str]) -> bool:
        """Whether the table's own constraints (a primary key, a unique index on some of the
        ``key`` columns) make ``key`` unique, so that no scan needs to check it."""
        return False

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> TableSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
