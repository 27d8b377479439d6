"""A table named by a location, read in one snapshot: what ``backfill.diff_tables`` compares.

    duckdb:///path/to/warehouse.duckdb#schema.table
    postgresql://user@host:5432/db#schema.table      (also postgres://)
    iceberg:///path/to/warehouse#schema.table         (an Iceberg folder catalog, read by Spark)
    path/to/file.parquet, or a folder of Parquet files
    model_name, or schema.table                        (with ``project``: its warehouse)

The last form is a table of a project's own warehouse, opened by the engine its settings name
(``engine:`` in backfill.yml: DuckDB, PostgreSQL, Spark with any Iceberg catalog, dbt's
warehouse): a model's published table, or any ``schema.table`` there. An Iceberg catalog other
than a folder (REST, Hive, JDBC, with its credentials) is reached that way.

:func:`open_table` returns a :class:`TableSource`: the table's columns (with the engine's
:class:`~.base.ColumnKind` of each), its dialect, and the two ways to ask it something: small
results as rows, larger ones as Arrow. Every question asked of one source sees one snapshot:

* DuckDB: a read-only connection to the file (no other process can write it meanwhile) and one
  transaction;
* PostgreSQL: one ``REPEATABLE READ, READ ONLY`` transaction on one ADBC connection, through
  which both the fingerprints and the streamed rows are read;
* Parquet: the files as DuckDB reads them (files are not versioned: a file rewritten while the
  diff runs is not detected).
* Iceberg (Spark): the snapshot ``main`` points to when the table is opened, by id
  (``VERSION AS OF``) in every query: commits landing meanwhile are not seen.

The source says which in :attr:`TableSource.snapshot`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .._secrets import mask_url
from ..errors import InvalidInputError
from . import engine_types
from .table_source import TableSource

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

__all__ = ["TableSource", "open_table"]


def _split(spec: str, form: str) -> tuple[str, tuple[str, str]]:
    """(the database part, (schema, table)) of ``db#schema.table``."""
    db, sep, name = spec.rpartition("#")
    schema, dot, table = name.partition(".")
    if not sep or not dot or not schema or not table:
        raise InvalidInputError(f"{mask_url(spec)!r}: expected {form}")
    return db, (schema, table)


def _source(name: str, location: str, database: str, rel: tuple[str, str] | None) -> TableSource:
    """The table of the installed engine plugin ``name``'s ``table_source`` (found through the
    engines' registry: the table classes live with their engines, which the stages above reach
    only through it)."""
    ep = engine_types().get(name)
    if ep is None:
        raise InvalidInputError(f"{location}: engine type {name!r} is not installed")
    factory = ep.load()
    opener = getattr(getattr(factory, "__self__", factory), "table_source", None)
    if opener is None:
        raise InvalidInputError(f"{location}: the {name} engine cannot open tables by location")
    source = opener(location, database, rel)
    if not isinstance(source, TableSource):
        raise InvalidInputError(f"{location}: the {name} engine returned no TableSource")
    return source


def _project_table(spec: str, project: Project | str | Path) -> TableSource:
    """The model (or ``schema.table``) ``spec`` of ``project``'s warehouse, opened by the
    project's engine."""
    from ..model.files import load_project
    from ..model.project import Project
    from .registry import engine_for

    loaded = project if isinstance(project, Project) else load_project(project)
    engine = engine_for(loaded)
    try:  # the source holds its own connection (or session): the engine is not needed after
        return engine.published_table(loaded, spec, f"{spec} (project {loaded.name})")
    finally:
        engine.close()


def open_table(spec: str, project: Project | str | Path | None = None) -> TableSource:
    """The table at ``spec`` (see the module's documentation; a model name or ``schema.table``
    is a table of ``project``'s warehouse, a Project or its folder); InvalidInputError naming it
    when the location cannot be read, NotFoundError when it has no such table."""
    if not isinstance(spec, str) or not spec:
        raise InvalidInputError(f"table location {spec!r}: expected a string")
    masked = mask_url(spec)
    if spec.startswith("iceberg://"):
        folder, rel = _split(spec[len("iceberg://") :], "iceberg:///warehouse#schema.table")
        return _source("spark", masked, folder, rel)
    if (
        project is not None
        and "://" not in spec
        and "/" not in spec
        and not spec.lower().endswith(".parquet")
    ):
        return _project_table(spec, project)
    if spec.startswith("duckdb://"):
        db, rel = _split(spec[len("duckdb://") :], "duckdb:///path.duckdb#schema.table")
        if not Path(db).exists():
            raise InvalidInputError(f"{masked}: no DuckDB file {db}")
        return _source("duckdb", masked, db, rel)
    if spec.startswith(("postgresql://", "postgres://")):
        url, rel = _split(spec, "postgresql://user@host/db#schema.table")
        return _source("postgres", masked, url, rel)
    path = Path(spec)
    if path.is_dir():
        return _source("duckdb", masked, str(path / "**" / "*.parquet"), None)
    if path.suffix.lower() == ".parquet":
        if not path.exists():
            raise InvalidInputError(f"{spec}: no such file")
        return _source("duckdb", masked, str(path), None)
    raise InvalidInputError(
        f"table location {masked!r}: expected duckdb:///path.duckdb#schema.table, "
        "postgresql://...#schema.table, iceberg:///warehouse#schema.table, a .parquet file or "
        "a folder of them, or a model (or schema.table) of a project given with project="
    )
