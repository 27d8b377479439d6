"""Engines run model SQL where the data lives. DuckDB is the embedded default."""

from __future__ import annotations

from .base import Area, Engine, PartitionFingerprint, TaskFailure, WriteResult

__all__ = ["Area", "Engine", "PartitionFingerprint", "TaskFailure", "WriteResult", "open_engine"]


def open_engine(settings: object) -> Engine:
    """The engine a loaded project's settings name (``engine.type`` in backfill.yml)."""
    from ..project_files import EngineSettings

    if not isinstance(settings, EngineSettings):
        raise TypeError(f"expected EngineSettings, got {type(settings).__name__}")
    if settings.type == "duckdb":
        from .duckdb import DuckDBEngine

        return DuckDBEngine(settings.path, schema=settings.schema, **dict(settings.options))
    if settings.type == "dbt":  # a dbt project (Project.from_dbt): runs through dbt
        from ..dbt.engine import DbtEngine

        return DbtEngine(**dict(settings.options))
    raise ValueError(f"unknown engine type {settings.type!r}")  # pragma: no cover
