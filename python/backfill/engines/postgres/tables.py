"""A PostgreSQL table as a :class:`~..table_source.TableSource`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ...errors import InvalidInputError, NotFoundError
from ..base import Column
from ..table_source import TableSource
from .arrow import to_arrow
from .sql import DIALECT

__all__ = ["PostgresTable"]


class PostgresTable(TableSource):
    """A PostgreSQL table read in one REPEATABLE READ, READ ONLY transaction (ADBC)."""

    def __init__(self, location: str, url: str, rel: tuple[str, str]) -> None:
        import adbc_driver_manager
        import adbc_driver_postgresql.dbapi as adbc  # type: ignore[import-untyped]

        self.location = location
        self.dialect = DIALECT
        self.relation = DIALECT.qualified(rel)
        self.snapshot = "PostgreSQL REPEATABLE READ READ ONLY transaction"
        self._error = adbc_driver_manager.Error
        try:
            self._conn = adbc.connect(url, autocommit=False)
        except adbc_driver_manager.Error as exc:
            raise InvalidInputError(f"{location}: cannot connect: {_first_line(exc)}") from None
        self._cur = self._conn.cursor()
        # The driver opened the transaction: these must be its first statements.
        self._cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        self._cur.execute("SET TimeZone TO 'UTC'")  # timestamptz read and filtered as UTC
        # LLVM compiled a key-range search of 3,200 ranges for longer than the scan took
        # (101 s against 28 s on 2M rows); the fingerprint scans gain nothing from it either.
        self._cur.execute("SET jit = off")
        found = self.rows(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typname "
            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            f"WHERE a.attrelid = to_regclass({DIALECT.string(self.relation)}) "
            "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
        )
        if not found:
            self.close()
            raise NotFoundError(f"{location}: no such table {rel[0]}.{rel[1]}")
        self.columns = [Column(n, t, DIALECT.kind_of(base)) for n, t, base in found]

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            self._cur.execute(sql)
            return list(self._cur.fetchall())
        except self._error as exc:
            raise InvalidInputError(f"{self.location}: {_first_line(exc)}") from None

    def arrow(self, sql: str) -> Any:
        import pyarrow as pa  # type: ignore[import-untyped]

        self._cur.execute(sql)
        return to_arrow(self._cur.fetch_record_batch()).read_all() if sql else pa.table({})

    def unique(self, key: Sequence[str]) -> bool:
        # A unique index without a predicate or expressions over some of the key's columns.
        names = ", ".join(DIALECT.string(k) for k in key)
        found = self.rows(
            "SELECT count(*) FROM pg_index i WHERE i.indrelid = "
            f"to_regclass({DIALECT.string(self.relation)}) AND i.indisunique "
            "AND i.indpred IS NULL AND i.indexprs IS NULL AND NOT EXISTS (SELECT 1 FROM "
            "unnest(i.indkey) AS k(n) JOIN pg_attribute a ON a.attrelid = i.indrelid "
            f"AND a.attnum = k.n WHERE a.attname NOT IN ({names}))"
        )
        return bool(int(str(found[0][0])))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.rollback()
        with contextlib.suppress(Exception):
            self._cur.close()
        with contextlib.suppress(Exception):
            self._conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
