"""The ``engine:`` section of ``backfill.yml``: one reader per engine type, each checking its
settings and naming the bad value and what was expected."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._secrets import mask_text, mask_url, masked_repr
from ..errors import InvalidInputError

__all__ = ["ENGINE_SETTINGS", "TABLE_PARTITION_ENGINES", "EngineSettings", "ProjectError"]

#: engine types whose published tables may be declaratively partitioned (a model's
#: ``table_partitions``): a partition is published by exchanging it whole
TABLE_PARTITION_ENGINES = ("postgres",)

# DuckDBEngine keyword settings allowed under engine: (seconds, flags, counts).
DUCKDB_OPTIONS: dict[str, type] = {
    "lock_timeout": float,
    "keep_open": bool,
    "linger": float,
    "conflict_retries": int,
}


class ProjectError(InvalidInputError):
    """A project file is invalid; the message names the file (and model) and what was expected."""


@dataclass(frozen=True)
class EngineSettings:
    type: str = "duckdb"
    path: Path = Path("warehouse.duckdb")  # absolute after load
    schema: str = "main"  # where published models live
    options: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # the options may hold a URL with a password, or catalog keys
        return masked_repr(self)


def _duckdb_settings(cfg: dict[str, Any], root: Path, where: str) -> EngineSettings:
    path = cfg.pop("path", "warehouse.duckdb")
    schema = cfg.pop("schema", "main")
    for name, value in (("path", path), ("schema", schema)):
        if not isinstance(value, str) or not value:
            raise ProjectError(f"{where}: engine {name} {value!r} must be a non-empty string")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", schema):
        raise ProjectError(f"{where}: engine schema {schema!r} must be a plain identifier")
    for key, value in cfg.items():
        if key not in DUCKDB_OPTIONS:
            raise ProjectError(
                f"{where}: unknown engine setting {key!r}; expected type, path, "
                f"schema, {', '.join(DUCKDB_OPTIONS)}"
            )
        kind_ok = (
            isinstance(value, bool)
            if DUCKDB_OPTIONS[key] is bool
            else (isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0)
        )
        if not kind_ok:
            raise ProjectError(
                f"{where}: engine {key} {value!r} must be "
                f"{'true or false' if DUCKDB_OPTIONS[key] is bool else 'a number >= 0'}"
            )
    db = Path(path)
    return EngineSettings("duckdb", db if db.is_absolute() else root / db, schema, cfg)


# PostgresEngine keyword settings allowed under engine: (count, seconds, count), each >= 1.
POSTGRES_OPTIONS: dict[str, type] = {
    "pool_size": int,
    "connect_timeout": float,
    "conflict_retries": int,
}


def _postgres_settings(cfg: dict[str, Any], root: Path, where: str) -> EngineSettings:
    """``engine: {type: postgres, url: postgresql://user@host:5432/db, schema: public}``."""
    url = cfg.pop("url", None)
    schema = cfg.pop("schema", "public")
    if not isinstance(url, str) or not url:
        raise ProjectError(
            f"{where}: engine type postgres needs url: postgresql://user@host:5432/database"
        )
    masked = mask_url(url)  # never echo a password
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ProjectError(f"{where}: engine url {masked!r} must start with postgresql://")
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ProjectError(f"{where}: engine url {masked!r} has a malformed port") from None
    if not parts.path.strip("/"):
        raise ProjectError(
            f"{where}: engine url {masked!r} names no database "
            "(postgresql://user@host:5432/database)"
        )
    if not isinstance(schema, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise ProjectError(
            f"{where}: engine schema {schema!r} must be a plain identifier (letters, digits, _)"
        )
    for key, value in cfg.items():
        if key not in POSTGRES_OPTIONS:
            raise ProjectError(
                f"{where}: unknown engine setting {key!r}; expected type, url, "
                f"schema, {', '.join(POSTGRES_OPTIONS)}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value < 1
            or (POSTGRES_OPTIONS[key] is int and not isinstance(value, int))
        ):
            raise ProjectError(
                f"{where}: engine {key} {value!r} must be "
                f"{'an integer' if POSTGRES_OPTIONS[key] is int else 'a number'} "
                ">= 1"
            )
    return EngineSettings("postgres", schema=schema, options={"url": url, **cfg})


SPARK_OPTIONS = ("master", "catalog", "conf", "jars", "pool", "stream_periods")


def _spark_settings(cfg: dict[str, Any], root: Path, where: str) -> EngineSettings:
    """``engine: {type: spark, master, catalog, schema, conf, jars}``: ``catalog`` is a folder
    (an Iceberg hadoop catalog, default ``.backfill/iceberg``) or a mapping of Iceberg catalog
    properties passed to Spark as they are (``{type: rest, uri: ...}``); ``conf`` is Spark
    configuration for the session."""
    schema = cfg.pop("schema", "main")
    if not isinstance(schema, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", schema):
        raise ProjectError(f"{where}: engine schema {schema!r} must be a plain identifier")
    for key in cfg:
        if key not in SPARK_OPTIONS:
            raise ProjectError(
                f"{where}: unknown spark engine setting {key!r}; expected type, "
                f"schema, {', '.join(SPARK_OPTIONS)}"
            )
    options: dict[str, Any] = {}
    path = _spark_catalog(cfg.pop("catalog", ".backfill/iceberg"), options, root, where)
    master = cfg.pop("master", "local[*]")
    if not isinstance(master, str) or not re.match(
        r"(local(\[[0-9*]+(,\d+)?\])?|spark://|"
        r"yarn|k8s://)",
        master,
    ):
        raise ProjectError(
            f"{where}: engine master {master!r} must be local[*], local[N], "
            "spark://host:port, yarn or k8s://..."
        )
    options["master"] = master
    conf = cfg.pop("conf", {})
    if not isinstance(conf, Mapping):
        raise ProjectError(f"{where}: engine conf must be a mapping of Spark settings")
    options["conf"] = {str(k): str(v) for k, v in conf.items()}
    options.update(_spark_extras(cfg, root, where))
    return EngineSettings("spark", path, schema, options)


def _spark_catalog(catalog: object, options: dict[str, Any], root: Path, where: str) -> Path:
    """The Iceberg catalog's folder; a mapping of catalog properties goes into ``options``."""
    if isinstance(catalog, Mapping):
        options["catalog"] = {str(k): str(v) for k, v in catalog.items()}
        return root / ".backfill" / "iceberg"
    if isinstance(catalog, str) and catalog:
        return Path(catalog) if Path(catalog).is_absolute() else root / catalog
    raise ProjectError(
        f"{where}: engine catalog {mask_text(repr(catalog))} must be a folder "
        "or a mapping "
        "of Iceberg catalog properties"
    )


def _spark_extras(cfg: dict[str, Any], root: Path, where: str) -> dict[str, Any]:
    """The optional settings: ``stream_periods``, ``jars`` (relative to the project) and
    ``pool``."""
    options: dict[str, Any] = {}
    if "stream_periods" in cfg:
        value = cfg.pop("stream_periods")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ProjectError(f"{where}: engine stream_periods {value!r} must be an integer >= 1")
        options["stream_periods"] = value
    for key in ("jars", "pool"):
        if key in cfg:
            value = cfg.pop(key)
            if not isinstance(value, str) or not value:
                raise ProjectError(f"{where}: engine {key} {value!r} must be a non-empty string")
            options[key] = (
                str(root / value) if key == "jars" and not Path(value).is_absolute() else value
            )
    return options


#: engine type -> the reader of its ``engine:`` settings in backfill.yml (cfg without ``type``)
ENGINE_SETTINGS: dict[str, Callable[[dict[str, Any], Path, str], EngineSettings]] = {
    "duckdb": _duckdb_settings,
    "postgres": _postgres_settings,
    "spark": _spark_settings,
}
