"""A table named by a location, read in one snapshot: what ``backfill.diff_tables`` compares.

    duckdb:///path/to/warehouse.duckdb#schema.table
    postgresql://user@host:5432/db#schema.table      (also postgres://)
    path/to/file.parquet, or a folder of Parquet files

:func:`open_table` returns a :class:`TableSource`: the table's columns (with the engine's
:class:`~.base.ColumnKind` of each), its dialect, and the two ways to ask it something: small
results as rows, larger ones as Arrow. Every question asked of one source sees one snapshot:

* DuckDB: a read-only connection to the file (no other process can write it meanwhile) and one
  transaction;
* PostgreSQL: one ``REPEATABLE READ, READ ONLY`` transaction on one ADBC connection, through
  which both the fingerprints and the streamed rows are read;
* Parquet: the files as DuckDB reads them (files are not versioned: a file rewritten while the
  diff runs is not detected).

The source says which in :attr:`TableSource.snapshot`.
"""

from __future__ import annotations

from pathlib import Path

from .._secrets import mask_url
from ..errors import InvalidInputError
from . import engine_types
from .table_source import TableSource

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


def open_table(spec: str) -> TableSource:
    """The table at ``spec`` (see the module's documentation); InvalidInputError naming it when
    the location cannot be read, NotFoundError when it has no such table."""
    if not isinstance(spec, str) or not spec:
        raise InvalidInputError(f"table location {spec!r}: expected a string")
    masked = mask_url(spec)
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
        "postgresql://...#schema.table, a .parquet file or a folder of them"
    )
