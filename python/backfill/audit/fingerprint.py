"""Table fingerprints: has this partition changed at all?

>>> a = backfill.fingerprint(old_table)                     # doctest: +SKIP
>>> a == backfill.fingerprint(new_table.sort_by("id"))       # same rows in any order -> True

A fingerprint is the row count plus a sum (mod 2^64) of per-row hashes of logical values, so it
ignores row order, chunking and dictionary encoding, counts duplicate rows, and changes when one
value, one row more or one row less differs. Per-column digests tell which columns differ. The
definition is in ``cpp/include/backfill/fingerprint.hpp``; fingerprints compare only with
fingerprints of the same ``kind`` (an in-engine SQL fingerprint is another kind).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import _core
from .._arrow import ArrowTable, html_table
from ..errors import InvalidInputError

__all__ = ["Fingerprint", "fingerprint"]


class Fingerprint:
    """Row count, hex digest and per-column digests of a table (or of one partition)."""

    __slots__ = ("_by_partition", "columns", "digest", "kind", "partitions", "rows")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.kind: str = raw["kind"]
        self.rows: int = raw["rows"]
        self.digest: str = raw["digest"]
        self.columns: dict[str, str] = dict(raw["columns"])
        parts = raw.get("partitions")
        self.partitions: ArrowTable | None = None if parts is None else ArrowTable(parts)
        self._by_partition: dict[str | None, Fingerprint] = {
            label: Fingerprint(fp) for label, fp in raw.get("by_partition", [])
        }

    @property
    def hexdigest(self) -> str:
        return self.digest

    def partition(self, label: str | None) -> Fingerprint:
        """The fingerprint of one partition (by label; ``None`` for null partition values)."""
        if self.partitions is None:
            raise InvalidInputError("this fingerprint has no partitions: pass partition_by=")
        try:
            return self._by_partition[label]
        except KeyError:
            raise InvalidInputError(
                f"no partition {label!r} (partitions: "
                f"{', '.join(str(k) for k in self._by_partition)})"
            ) from None

    def _check_kind(self, other: Fingerprint) -> None:
        if other.kind != self.kind:
            raise InvalidInputError(
                f"fingerprints of different kinds ({self.kind!r} vs "
                f"{other.kind!r}) cannot be compared"
            )

    def differing_columns(self, other: Fingerprint) -> list[str]:
        """Columns whose digests differ, plus columns only one side has (sorted)."""
        self._check_kind(other)
        names = sorted(set(self.columns) | set(other.columns))
        return [c for c in names if self.columns.get(c) != other.columns.get(c)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fingerprint):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.digest == other.digest
            and self.columns == other.columns
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.digest))

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The per-partition table when there is one, else the per-column digests."""
        return self._table().__arrow_c_stream__(requested_schema)

    def _table(self) -> ArrowTable:
        if self.partitions is not None:
            return self.partitions
        return ArrowTable(
            _core._fingerprint_columns_table(list(self.columns), list(self.columns.values()))
        )

    def to_pandas(self) -> Any:
        return self._table().to_pandas()

    def __repr__(self) -> str:
        parts = "" if self.partitions is None else f", {self.partitions.num_rows} partitions"
        return f"Fingerprint({self.digest}, rows={self.rows}, columns={len(self.columns)}{parts})"

    def __str__(self) -> str:
        lines = [f"fingerprint {self.digest} ({self.rows:,} rows, {self.kind})"]
        lines += [f"  {c}: {d}" for c, d in self.columns.items()]
        return "\n".join(lines)

    def _repr_html_(self) -> str | None:
        if len(self.columns) > 200:
            return None
        head = html.escape(f"fingerprint {self.digest} — {self.rows:,} rows ({self.kind})")
        body = html_table(["column", "digest"], [[c, d] for c, d in self.columns.items()])
        parts = self.partitions._repr_html_() if self.partitions is not None else ""
        return f"<div><p><code>{head}</code></p>{body}{parts or ''}</div>"


def fingerprint(
    table: Any,
    *,
    columns: Sequence[str] | None = None,
    partition_by: str | None = None,
    grain: Literal["hour", "day", "week", "month", "quarter", "year"] = "day",
    tz: str = "UTC",
    threads: int = 0,
) -> Fingerprint:
    """Fingerprints any Arrow-compatible table (optionally per partition of ``partition_by``)."""
    if isinstance(columns, str):
        columns = [columns]
    raw = _core.fingerprint(
        table,
        None if columns is None else list(columns),
        partition_by=partition_by,
        grain=grain,
        tz=tz,
        threads=threads,
    )
    return Fingerprint(raw)
