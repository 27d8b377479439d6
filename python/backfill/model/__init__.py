"""The model stage: a pipeline's sources and models (``Project``), read from project files."""

from __future__ import annotations

from .files import PROJECT_FILE, EngineSettings, ProjectError, ProjectSettings, load_project
from .project import Dependency, Model, Project, Source, all_of, overlap, window
from .rendering import render, sql_literal

__all__ = [
    "PROJECT_FILE",
    "Dependency",
    "EngineSettings",
    "Model",
    "Project",
    "ProjectError",
    "ProjectSettings",
    "Source",
    "all_of",
    "load_project",
    "overlap",
    "render",
    "sql_literal",
    "window",
]
