"""The dbt-duckdb or dbt-postgres profile of a project, and the profiles backfill generates.

A backfill runs dbt with a generated ``profiles.yml`` (in the project's state directory): the
user's target, with a DuckDB ``path`` made absolute (relative paths are read against the
project directory) and, for a backfill into an audit area, its ``schema`` replaced, so dbt writes
beside the published tables and never over them. A dbt-postgres target also gives the URL the
warehouse engine connects to (host, port, user, password, dbname of the target).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import yaml  # type: ignore[import-untyped]

from ..._secrets import mask_text, masked_repr
from .manifest import DbtError

__all__ = ["DbtProfile", "read_profile", "write_profile"]

GENERATED_TARGET = "backfill"


@dataclass(frozen=True)
class DbtProfile:
    name: str  # the profile name (dbt_project.yml `profile:`)
    target: str
    output: Mapping[str, Any]  # the target's settings, as written
    path: Path | None  # the DuckDB file, absolute (None for postgres)
    schema: str  # where dbt writes the published models
    kind: str = "duckdb"  # the adapter: duckdb or postgres
    url: str | None = None  # postgres: postgresql://user[:password]@host:port/dbname

    def __repr__(self) -> str:  # the target's settings and URL hold its password
        return masked_repr(self)


def _render(value: str) -> str:
    """Renders dbt's ``env_var()`` in a profile value (the only Jinja a path usually holds)."""

    def env_var(name: str, default: str | None = None) -> str:
        if name in os.environ:
            return os.environ[name]
        if default is None:
            raise DbtError(f"profiles.yml reads env_var({name!r}), which is not set")
        return default

    return (
        jinja2.Environment(undefined=jinja2.StrictUndefined)
        .from_string(value)
        .render(env_var=env_var)
    )


def _yaml(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        # A YAML error quotes the lines around it, which may hold a password.
        raise DbtError(f"{path}: cannot read: {mask_text(str(exc))}") from None
    if not isinstance(doc, dict):
        raise DbtError(f"{path}: expected a mapping")
    return doc


def profiles_dir_of(project_dir: Path, profiles_dir: str | Path | None) -> Path:
    if profiles_dir is not None:
        return Path(profiles_dir)
    if env := os.environ.get("DBT_PROFILES_DIR"):
        return Path(env)
    return project_dir if (project_dir / "profiles.yml").is_file() else Path.home() / ".dbt"


def read_profile(
    project_dir: Path, profiles_dir: str | Path | None = None, target: str | None = None
) -> DbtProfile:
    """The project's dbt-duckdb target (``target`` or the profile's default)."""
    name = _yaml(project_dir / "dbt_project.yml").get("profile")
    if not isinstance(name, str):
        raise DbtError(f"{project_dir / 'dbt_project.yml'}: no `profile:` name")
    file = profiles_dir_of(project_dir, profiles_dir) / "profiles.yml"
    profiles = _yaml(file)
    profile = profiles.get(name)
    if not isinstance(profile, dict) or not isinstance(profile.get("outputs"), dict):
        raise DbtError(
            f"{file}: no profile {name!r} with outputs (profiles: "
            f"{', '.join(k for k in profiles if k != 'config') or 'none'})"
        )
    chosen = target or _render(str(profile.get("target", "dev")))
    output = profile["outputs"].get(chosen)
    if not isinstance(output, dict):
        raise DbtError(
            f"{file}: profile {name!r} has no target {chosen!r}; targets: "
            f"{', '.join(profile['outputs'])}"
        )
    kind = _render(str(output.get("type", "")))
    if kind == "postgres":
        return DbtProfile(
            name,
            chosen,
            output,
            None,
            _render(str(output.get("schema", "public"))),
            "postgres",
            _postgres_url(output, f"{file}: target {chosen!r}"),
        )
    if kind != "duckdb":
        raise DbtError(
            f"{file}: target {chosen!r} of profile {name!r} has type "
            f"{output.get('type')!r}; backfill runs dbt projects on dbt-duckdb or "
            "dbt-postgres"
        )
    raw_path = _render(str(output.get("path", ":memory:")))
    if raw_path.startswith(":memory:") or raw_path.startswith("md:"):
        raise DbtError(
            f"{file}: target {chosen!r} uses path {raw_path!r}; backfill needs a "
            "DuckDB database file"
        )
    db = Path(raw_path).expanduser()
    db = db if db.is_absolute() else (project_dir / db).resolve()
    return DbtProfile(name, chosen, output, db, _render(str(output.get("schema", "main"))))


def _postgres_url(output: Mapping[str, Any], where: str) -> str:
    """The URL of a dbt-postgres target (its host, port, user, password, dbname)."""
    values = {
        k: _render(str(output[k]))
        for k in ("host", "port", "user", "password", "dbname")
        if output.get(k) is not None
    }
    dbname = values.get("dbname") or (
        _render(str(output["database"])) if output.get("database") is not None else None
    )
    missing = [k for k in ("host", "user") if not values.get(k)] + ([] if dbname else ["dbname"])
    if missing:
        raise DbtError(f"{where}: a postgres target needs {', '.join(missing)}")
    auth = quote(values["user"], safe="")
    if values.get("password"):
        auth += ":" + quote(values["password"], safe="")
    return (
        f"postgresql://{auth}@{values['host']}:{values.get('port', '5432')}/"
        f"{quote(str(dbname), safe='')}"
    )


def write_profile(profile: DbtProfile, directory: Path, *, schema: str) -> Path:
    """Writes ``directory/profiles.yml`` with one target, ``backfill``: the user's target with
    an absolute path and ``schema``. Returns the directory (for ``--profiles-dir``)."""
    directory.mkdir(parents=True, exist_ok=True)
    output = {**profile.output, "schema": schema}
    if profile.path is not None:
        output["path"] = str(profile.path)
    # dbt 1.10 deadlocks when its microbatch model runners hold every thread (dbt-core#11420):
    # a model runner needs a second thread for its batches, so never fewer than 2.
    threads = output.get("threads", 1)
    output["threads"] = max(2, threads if isinstance(threads, int) else 1)
    doc = {profile.name: {"target": GENERATED_TARGET, "outputs": {GENERATED_TARGET: output}}}
    text = "# generated by backfill: do not edit\n" + yaml.safe_dump(doc, sort_keys=False)
    file = directory / "profiles.yml"
    if not file.is_file() or file.read_text(encoding="utf-8") != text:
        file.write_text(text, encoding="utf-8")
    return directory
