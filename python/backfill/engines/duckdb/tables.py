"""A table of a DuckDB file, or Parquet files, as a :class:`~..table_source.TableSource`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import duckdb

from ...errors import InvalidInputError, NotFoundError
from ..base import Column
from ..table_source import TableSource
from .sql import DIALECT

__all__ = ["DuckDBTable", "parquet_relation"]


def parquet_relation(files: str) -> str:
    """The DuckDB relation of the Parquet ``files`` (a path or glob) as a diff reads them.

    ``can_have_nan``: a float column's min/max in a Parquet file leave out its NaNs (the format
    says so; pyarrow writes no NaN count), and DuckDB otherwise takes them as the column's
    whole range and folds expressions at plan time: over a column whose min and max are 0,
    ``isnan(x)`` and ``x > 0`` became ``false``, so a NaN took the token ``-inf`` (a DuckDB
    table or PostgreSQL gave ``nan``)."""
    return f"read_parquet({DIALECT.string(files)}, can_have_nan = true)"


class DuckDBTable(TableSource):
    """A DuckDB file's table (read-only connection) or Parquet files (an in-memory DuckDB)."""

    def __init__(
        self, location: str, path: str | None, rel: tuple[str, str] | None, files: str | None
    ) -> None:
        self.location = location
        self.dialect = DIALECT
        snapshot = "DuckDB read-only connection, one transaction"
        try:
            self._con = duckdb.connect(path or ":memory:", read_only=path is not None)
        except duckdb.ConnectionException as exc:
            # The file is open in this process already (dbt's DuckDB adapter keeps its
            # connection between invocations): DuckDB shares one database per file and process
            # and refuses a read-only one beside it. A connection to that database reads one
            # snapshot all the same, in its transaction.
            if path is None or "different configuration" not in str(exc):
                raise InvalidInputError(f"{location}: cannot open the DuckDB file: {exc}") from None
            try:
                self._con = duckdb.connect(path)
            except duckdb.Error as again:
                raise InvalidInputError(
                    f"{location}: cannot open the DuckDB file: {again}"
                ) from None
            snapshot = "DuckDB connection of this process (the file was open), one transaction"
        except duckdb.Error as exc:
            raise InvalidInputError(f"{location}: cannot open the DuckDB file: {exc}") from None
        self._rel = rel
        if rel is not None:
            self.relation = DIALECT.qualified(rel)
            self.snapshot = snapshot
        else:
            assert files is not None
            self.relation = parquet_relation(files)
            self.snapshot = "Parquet files as read (not versioned)"
        self._con.execute("BEGIN TRANSACTION")
        try:
            described = self._con.execute(f"DESCRIBE SELECT * FROM {self.relation}").fetchall()
        except duckdb.Error as exc:
            self._con.close()
            raise NotFoundError(f"{location}: no such table ({str(exc).splitlines()[0]})") from None
        self.columns = [Column(r[0], str(r[1]), DIALECT.kind_of(str(r[1]))) for r in described]

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            return self._con.execute(sql).fetchall()
        except duckdb.Error as exc:
            raise InvalidInputError(f"{self.location}: {str(exc).splitlines()[0]}") from None

    def arrow(self, sql: str) -> Any:
        return self._con.sql(sql).to_arrow_table()

    def unique(self, key: Sequence[str]) -> bool:
        if self._rel is None:
            return False  # Parquet files have no constraints
        found = self._con.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() WHERE schema_name = ? "
            "AND table_name = ? AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')",
            list(self._rel),
        ).fetchall()
        return any(set(cols) <= set(key) for (cols,) in found)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._con.close()
