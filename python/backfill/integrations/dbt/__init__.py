"""dbt projects: import the graph, plan the batches dbt runs, backfill through dbt.

>>> project = backfill.Project.from_dbt("examples/dbt_shop")          # doctest: +SKIP
>>> plan = project.plan("fct_daily_sales+", "2026-08-01", "2026-10-29", propagate="clip")
>>> bf = project.backfill(plan, reason="discount bug fixed")          # doctest: +SKIP
>>> bf.run(); bf.audit(); bf.publish(note="revenue 2% lower")        # doctest: +SKIP

:mod:`.manifest` reads ``target/manifest.json`` (``dbt parse`` when missing or stale),
:mod:`.mapping` turns it into a :class:`~backfill.Project`, :mod:`.selectors` selects as dbt does,
:mod:`.engine` runs tasks through ``dbt run`` with write-audit-publish.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...model import EngineSettings, ProjectSettings
from .consumers import dbt_consumers
from .manifest import SUPPORTED_VERSIONS, DbtError, load_manifest
from .mapping import DbtProject, project_from_manifest
from .profile import read_profile

__all__ = ["SUPPORTED_VERSIONS", "DbtError", "DbtProject", "load_dbt_project"]


def load_dbt_project(
    path: str | Path,
    *,
    profiles_dir: str | Path | None = None,
    target: str | None = None,
    parse: bool = True,
) -> DbtProject:
    """A dbt project directory (``dbt parse`` first when its manifest is missing or stale) or a
    ``manifest.json``, as a project. From a directory it can run: its settings name the dbt
    engine, the ledger (``<project>/.backfill``) and the audit gates found in the models'
    ``meta: {backfill: {audits: [...]}}``, and who is told of its changes (:mod:`.consumers`:
    exposure owners, ``meta.backfill.owners/consumers``, ``vars.backfill.notify``)."""
    p = Path(path)
    manifest = load_manifest(p, profiles_dir=profiles_dir, target=target, parse=parse)
    project_dir = None if p.suffix == ".json" else p.resolve()
    project = project_from_manifest(manifest, project_dir)
    if project_dir is None:
        return project
    profile = read_profile(project_dir, profiles_dir, target)
    options: dict[str, Any] = {
        "project_dir": str(project_dir),
        "target": target,
        "profiles_dir": str(profiles_dir) if profiles_dir else None,
    }
    audits = {}
    for name, m in project.models.items():
        gates = (m.meta.get("dbt", {}).get("meta") or {}).get("backfill", {}).get("audits")
        if gates:
            audits[name] = gates
    notify, lineage = dbt_consumers(project, manifest, project_dir)
    project.settings = ProjectSettings(
        root=project_dir,
        # a dbt-postgres warehouse has no file: its URL comes from the profile again
        engine=EngineSettings("dbt", profile.path or Path(), profile.schema, options),
        state_dir=project_dir / ".backfill",
        audits=audits,
        files={
            name: project_dir / info.path
            for name, info in project.dbt.items()
            if name in project.models
        },
        notify=notify,
        lineage=lineage,
    )
    return project
