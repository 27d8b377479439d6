"""Reading a dbt project's ``target/manifest.json`` (running ``dbt parse`` when it is missing or
older than a project file).

>>> m = load_manifest("examples/dbt_shop")      # doctest: +SKIP
>>> m.version, sorted(m.models)[:2]             # doctest: +SKIP
(12, ['clean_order_items', 'clean_orders'])

Manifest schema versions v10 (dbt 1.6), v11 (1.7) and v12 (1.8 to 1.10) are read; they differ in
fields we do not use (v12 added ``unit_tests``, 1.9 the source ``event_time`` config, still v12).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError, NotFoundError
from .invoke import invoke

log = logging.getLogger(__name__)

__all__ = [
    "SUPPORTED_VERSIONS",
    "DbtExposure",
    "DbtManifest",
    "DbtNode",
    "load_manifest",
    "manifest_is_stale",
]

SUPPORTED_VERSIONS = (10, 11, 12)
_VERSION = re.compile(r"/manifest/v(\d+)\.json$")
# Files whose change makes a parsed manifest stale (dbt's own partial-parse inputs).
_PROJECT_SUFFIXES = (".sql", ".yml", ".yaml", ".csv", ".py", ".md")
_SKIP_DIRS = {"target", "dbt_packages", "logs", ".backfill", "fixes", "__pycache__"}


class DbtError(InvalidInputError):
    """A dbt project or manifest cannot be read; the message says which and why."""


@dataclass(frozen=True)
class DbtNode:
    """A model, seed, snapshot or source of the manifest, with what backfill reads of it."""

    unique_id: str
    resource_type: str  # model | seed | snapshot | source
    name: str  # models, seeds, snapshots: their name; sources: "source_name.table"
    package: str
    path: str  # original_file_path, relative to the project
    fqn: tuple[str, ...]
    config: Mapping[str, Any]
    tags: tuple[str, ...]
    depends_on: tuple[str, ...]  # unique ids of parents
    raw_code: str | None
    relation: str | None  # relation_name: "database"."schema"."alias"
    schema: str | None
    alias: str | None
    raw: Mapping[str, Any] = field(repr=False, default_factory=dict)

    @property
    def event_time(self) -> str | None:
        value = self.config.get("event_time")
        return str(value) if value else None

    @property
    def materialized(self) -> str | None:
        value = self.config.get("materialized")
        return str(value) if value else None


@dataclass(frozen=True)
class DbtExposure:
    """A dashboard, notebook or application that depends on models (``exposures:``), with its
    owner, who is told when a model it depends on is published."""

    unique_id: str
    name: str
    owner_name: str | None
    owner_email: str | None
    depends_on: tuple[str, ...]  # unique ids


@dataclass(frozen=True)
class DbtManifest:
    """The parts of a manifest backfill uses, keyed by our names."""

    path: Path
    version: int
    dbt_version: str
    project_name: str
    nodes: Mapping[str, DbtNode]  # by unique_id, in manifest order
    by_name: Mapping[str, DbtNode]  # by our name (model name, "source.table")
    exposures: tuple[DbtExposure, ...] = ()

    @property
    def models(self) -> dict[str, DbtNode]:
        return {n.name: n for n in self.nodes.values() if n.resource_type == "model"}

    def __iter__(self) -> Iterator[DbtNode]:
        return iter(self.nodes.values())


def manifest_version(doc: Mapping[str, Any], where: str) -> int:
    meta = doc.get("metadata")
    url = meta.get("dbt_schema_version") if isinstance(meta, Mapping) else None
    if not isinstance(url, str) or not (m := _VERSION.search(url)):
        raise DbtError(
            f"{where}: not a dbt manifest (metadata.dbt_schema_version is {url!r}); "
            f"expected e.g. https://schemas.getdbt.com/dbt/manifest/v12.json"
        )
    version = int(m.group(1))
    if version not in SUPPORTED_VERSIONS:
        newer = " (newer than this backfill knows)" if version > max(SUPPORTED_VERSIONS) else ""
        raise DbtError(
            f"{where}: manifest schema version v{version}{newer} is not supported; "
            f"supported: {', '.join(f'v{v}' for v in SUPPORTED_VERSIONS)} "
            "(dbt-core 1.6 to 1.10)"
        )
    return version


def parse_manifest(doc: Mapping[str, Any], path: Path) -> DbtManifest:
    """A manifest document (``json.load`` of manifest.json) as a :class:`DbtManifest`."""
    where = str(path)
    version = manifest_version(doc, where)
    meta = doc["metadata"]
    nodes: dict[str, DbtNode] = {}
    for uid, raw in {**doc.get("nodes", {}), **doc.get("sources", {})}.items():
        kind = raw.get("resource_type")
        if kind not in ("model", "seed", "snapshot", "source"):
            continue  # tests, analyses, operations, unit tests
        config = raw.get("config") or {}
        if config.get("enabled") is False:
            continue
        name = f"{raw['source_name']}.{raw['name']}" if kind == "source" else str(raw["name"])
        deps = raw.get("depends_on", {}).get("nodes", []) if kind != "source" else []
        nodes[uid] = DbtNode(
            unique_id=uid,
            resource_type=kind,
            name=name,
            package=str(raw.get("package_name", "")),
            path=str(raw.get("original_file_path") or raw.get("path") or ""),
            fqn=tuple(raw.get("fqn", ())),
            config=config,
            tags=tuple(raw.get("tags") or config.get("tags") or ()),
            depends_on=tuple(deps),
            raw_code=raw.get("raw_code", raw.get("raw_sql")),
            relation=raw.get("relation_name"),
            schema=raw.get("schema"),
            alias=raw.get("alias") or raw.get("identifier") or raw.get("name"),
            raw=raw,
        )
    by_name: dict[str, DbtNode] = {}
    for node in nodes.values():
        other = by_name.get(node.name)
        if other is not None:
            raise DbtError(
                f"{where}: {node.resource_type} {node.name!r} ({node.unique_id}) has "
                f"the name of {other.unique_id}; backfill needs unique model, seed, "
                "snapshot and source names"
            )
        by_name[node.name] = node
    exposures = tuple(
        DbtExposure(
            uid,
            str(raw.get("name", uid)),
            (raw.get("owner") or {}).get("name"),
            (raw.get("owner") or {}).get("email"),
            tuple((raw.get("depends_on") or {}).get("nodes") or ()),
        )
        for uid, raw in (doc.get("exposures") or {}).items()
    )
    return DbtManifest(
        path,
        version,
        str(meta.get("dbt_version", "?")),
        str(meta.get("project_name") or _project_name(nodes)),
        nodes,
        by_name,
        exposures,
    )


def _project_name(nodes: Mapping[str, DbtNode]) -> str:
    return next((n.package for n in nodes.values() if n.resource_type == "model"), "dbt")


def read_manifest(path: str | Path) -> DbtManifest:
    file = Path(path)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFoundError(f"{file}: no such manifest") from None
    except (OSError, ValueError) as exc:
        raise DbtError(f"{file}: cannot read the manifest: {exc}") from None
    if not isinstance(doc, Mapping):
        raise DbtError(f"{file}: not a dbt manifest (a JSON object was expected)")
    return parse_manifest(doc, file)


def project_files(project_dir: Path) -> Iterator[Path]:
    """The project's own files that dbt parses (target/, packages, logs and state left out)."""
    for item in project_dir.rglob("*"):
        rel = item.relative_to(project_dir).parts
        if any(part in _SKIP_DIRS or part.startswith(".") for part in rel[:-1]):
            continue
        if item.is_file() and item.suffix in _PROJECT_SUFFIXES:
            yield item


def manifest_is_stale(project_dir: Path, manifest: Path) -> bool:
    """True when ``manifest`` is missing or older than a project file."""
    if not manifest.is_file():
        return True
    built = manifest.stat().st_mtime
    return any(f.stat().st_mtime > built for f in project_files(project_dir))


def load_manifest(
    path: str | Path,
    *,
    profiles_dir: str | Path | None = None,
    target: str | None = None,
    parse: bool = True,
) -> DbtManifest:
    """The manifest of a dbt project directory (``dbt parse`` first when it is missing or stale
    and ``parse``) or of a ``manifest.json`` file."""
    p = Path(path)
    if p.is_file() and p.suffix == ".json":
        return read_manifest(p)
    if not (p / "dbt_project.yml").is_file():
        raise NotFoundError(f"{p}: not a dbt project (no dbt_project.yml) nor a manifest.json")
    manifest = p / "target" / "manifest.json"
    if parse and manifest_is_stale(p, manifest):
        log.info("dbt parse in %s (manifest missing or older than a project file)", p)
        invoke(["parse"], project_dir=p, profiles_dir=profiles_dir, target=target)
    return read_manifest(manifest)
