"""Engines run model SQL where the data lives. DuckDB is the embedded default.

Engine types are plugins: ``open_engine`` looks the ``type`` of backfill.yml's ``engine`` up among
the ``backfill.engines`` entry points (``duckdb``, ``postgres`` and ``dbt`` ship with the
package; another package adds its own the same way), each a callable
``factory(settings) -> Engine``.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from .._extras import extra_required
from ..errors import InvalidInputError
from ..fingerprints import PartitionFingerprint, TaskFingerprint, recorded_partitions
from ..model.files import EngineSettings
from ..versions import KeptModel, PublishedVersion
from .base import (
    CHANGELOG_ADDED,
    CHANGELOG_COLUMNS,
    CHANGELOG_SCALE,
    CHANGELOG_TABLE,
    PUBLISHED,
    VERSIONS_COLUMNS,
    VERSIONS_TABLE,
    WHOLE,
    Area,
    Capabilities,
    Column,
    ColumnKind,
    DeadLetters,
    Engine,
    Number,
    Part,
    Period,
    PublishModel,
    PublishRequest,
    PublishResult,
    StalePublishedError,
    TaskFailure,
    WriteResult,
    scratch_area,
)

__all__ = [
    "CHANGELOG_ADDED",
    "CHANGELOG_COLUMNS",
    "CHANGELOG_SCALE",
    "CHANGELOG_TABLE",
    "PUBLISHED",
    "VERSIONS_COLUMNS",
    "VERSIONS_TABLE",
    "WHOLE",
    "Area",
    "Capabilities",
    "Column",
    "ColumnKind",
    "DeadLetters",
    "Engine",
    "KeptModel",
    "Number",
    "Part",
    "PartitionFingerprint",
    "Period",
    "PublishModel",
    "PublishRequest",
    "PublishResult",
    "PublishedVersion",
    "StalePublishedError",
    "TaskFailure",
    "TaskFingerprint",
    "WriteResult",
    "engine_capabilities",
    "engine_types",
    "open_engine",
    "recorded_partitions",
    "scratch_area",
    "type_capabilities",
]

GROUP = "backfill.engines"
# The extra to name when a shipped engine's import fails on a module not in EXTRA_OF_MODULE.
_ENGINE_EXTRA = {"postgres": "postgres", "spark": "spark", "dbt": "dbt"}


def engine_types() -> dict[str, Any]:
    """Engine type -> its entry point, for every installed engine plugin."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def engine_capabilities(settings: EngineSettings) -> Capabilities | None:
    """What the engine ``settings`` name declares, read from its class without connecting
    (None when the plugin is not installed or its factory is not an Engine class's)."""
    return type_capabilities(settings.type)


def type_capabilities(name: str) -> Capabilities | None:
    """What the installed engine type ``name`` declares, read from its class without
    connecting (None when the plugin is not installed or its factory is not an Engine class's)."""
    ep = engine_types().get(name)
    if ep is None:
        return None
    factory = ep.load()
    cls = getattr(factory, "__self__", factory)
    if isinstance(cls, type) and issubclass(cls, Engine):
        return cls.capabilities
    return None


def open_engine(settings: EngineSettings) -> Engine:
    """The engine a loaded project's settings name (``engine.type`` in backfill.yml)."""
    if not isinstance(settings, EngineSettings):
        raise TypeError(f"expected EngineSettings, got {type(settings).__name__}")
    types = engine_types()
    if settings.type not in types:
        raise InvalidInputError(
            f"engine type {settings.type!r} is not installed; installed: "
            f"{', '.join(sorted(types)) or 'none (reinstall backfill)'}"
        )
    with extra_required(f"the {settings.type!r} engine", _ENGINE_EXTRA.get(settings.type)):
        engine = types[settings.type].load()(settings)
    if not isinstance(engine, Engine):
        raise InvalidInputError(
            f"engine plugin {settings.type!r} returned {type(engine).__name__}, not an Engine"
        )
    return engine
