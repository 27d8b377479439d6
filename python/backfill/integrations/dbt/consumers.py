"""Who is told about a dbt project's published changes, and how.

* the owners of **exposures** (dashboards, notebooks, applications) that depend on a published
  model, by their ``owner.email``;
* ``meta: {backfill: {owners: [...], consumers: [...]}}`` on a model (entries as under a
  ``backfill.yml`` model: names, e-mail addresses or ``{name:, webhook:, email:}``);
* the ``notify:`` and ``lineage:`` settings (SMTP, named consumers, OpenLineage transports) under
  ``vars: {backfill: {...}}`` in ``dbt_project.yml``, as in ``backfill.yml``
  (:mod:`backfill.model.consumers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from ...model.consumers import (
    Consumer,
    LineageSettings,
    NotifySettings,
    read_consumers,
    read_lineage,
    read_notify,
)
from ...model.engine_settings import ProjectError
from .manifest import DbtManifest
from .mapping import DbtProject

__all__ = ["dbt_consumers"]


def _vars(project_dir: Path | None) -> dict[str, Any]:
    if project_dir is None or not (project_dir / "dbt_project.yml").is_file():
        return {}
    path = project_dir / "dbt_project.yml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ProjectError(f"{path}: not valid YAML: {exc}") from None
    found = ((doc.get("vars") or {}) if isinstance(doc, Mapping) else {}).get("backfill") or {}
    if not isinstance(found, Mapping):
        raise ProjectError(
            f"{path}: vars.backfill {found!r} must be a mapping with notify: and/or lineage:"
        )
    return dict(found)


def dbt_consumers(
    project: DbtProject, manifest: DbtManifest, project_dir: Path | None
) -> tuple[NotifySettings, LineageSettings | None]:
    """The project's notify settings (consumers by model) and lineage settings."""
    cfg = _vars(project_dir)
    where = (
        str((project_dir or manifest.path) / "dbt_project.yml")
        if project_dir
        else str(manifest.path)
    )
    unknown = set(cfg) - {"notify", "lineage"}
    if unknown:
        raise ProjectError(
            f"{where}: vars.backfill: unknown key(s) {sorted(unknown)}; expected notify, lineage"
        )
    notify = read_notify(cfg.get("notify"), f"{where} (vars.backfill)")
    by_model: dict[str, list[Consumer]] = {}
    for name, m in project.models.items():
        meta = (m.meta.get("dbt", {}).get("meta") or {}).get("backfill") or {}
        for role in ("owner", "consumer"):
            if meta.get(f"{role}s") is not None:
                by_model.setdefault(name, []).extend(
                    read_consumers(
                        meta[f"{role}s"], role, notify.consumers, f"model {name} (meta.backfill)"
                    )
                )
    names = {n.unique_id: n.name for n in manifest}
    for exp in manifest.exposures:
        if not exp.owner_email:
            continue
        owner = Consumer(
            exp.owner_name or exp.owner_email,
            None,
            (exp.owner_email,),
            f"owner of exposure {exp.name}",
        )
        for uid in exp.depends_on:
            if names.get(uid) in project.models:
                by_model.setdefault(names[uid], []).append(owner)
    lineage = (
        read_lineage(
            cfg["lineage"],
            project.name,
            project_dir or manifest.path.parent,
            f"{where} (vars.backfill)",
        )
        if cfg.get("lineage")
        else None
    )
    return (
        NotifySettings(
            notify.consumers,
            {m: tuple(c) for m, c in by_model.items()},
            notify.smtp,
            notify.retries,
            notify.backoff,
            notify.timeout,
        ),
        lineage,
    )
