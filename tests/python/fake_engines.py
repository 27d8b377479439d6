"""A base for in-memory test engines that only write (runner and executor tests): every call of
the Engine interface that inspects or publishes has no meaning for them and raises."""

from __future__ import annotations

from typing import Any

from backfill.engines import Engine


class WriteOnlyEngine(Engine):
    """Subclasses implement ``run_task``; the rest of the interface raises NotImplementedError."""

    name = "write-only"

    def render(self, *args: Any) -> str:
        return ""

    def columns(self, *args: Any) -> Any:
        raise NotImplementedError

    def fingerprints(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def measure_sums(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def is_unique(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def publish(self, *args: Any) -> Any:
        raise NotImplementedError

    def changelog_rows(self, *args: Any) -> Any:
        raise NotImplementedError

    def drop_area(self, backfill_id: str) -> None:
        pass
