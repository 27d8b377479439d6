"""The engine of a project: built from the ``engine:`` settings it was loaded with.

>>> engine = engine_for(backfill.Project.load("examples/shop"))        # doctest: +SKIP

Every stage that needs the project's engine (run, audit, publish, the CLI, Airflow) asks here,
so that how an engine is made from a project's settings is said once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from . import open_engine

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from .base import Engine

__all__ = ["engine_for"]


def engine_for(project: Project) -> Engine:
    """The engine ``project``'s settings name (``engine.type`` in backfill.yml)."""
    if project.settings is None:
        raise InvalidInputError(
            f"{project!r} has no engine settings: load it from a project "
            "directory (Project.load) or pass engine="
        )
    return open_engine(project.settings.engine)
