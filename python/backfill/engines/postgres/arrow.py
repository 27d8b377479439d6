"""Rows of the Postgres engine as Arrow, as ADBC's Postgres driver sends them, made usable by
the C++ diff batch by batch.

The driver sends ``numeric`` as an opaque extension type over strings (Arrow's decimals cannot
hold every numeric); each batch's strings are cast to ``decimal128(p, s)`` in Arrow (C++), from
the column's type modifier. An unconstrained ``numeric`` (a ``sum()`` of decimals, say) has no
fixed scale, so the SELECT rounds it to :data:`UNCONSTRAINED_SCALE` decimals and it arrives as
``decimal128(38, 10)``: the same type on both sides of a diff. Other opaque types (json, uuid,
...) arrive as their text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from .sql import UNCONSTRAINED_SCALE

__all__ = ["to_arrow"]


def _decimal(field: pa.Field) -> pa.DataType:
    meta = field.metadata or {}
    typmod = int(meta.get(b"POSTGRESQL:typmod", b"-1"))
    if typmod < 4:
        return pa.decimal128(38, UNCONSTRAINED_SCALE)
    precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
    return (
        pa.decimal128(precision, scale)
        if precision <= 38
        else pa.decimal256(min(precision, 76), scale)
    )


def _target(field: pa.Field) -> pa.DataType | None:
    """The type ``field`` becomes, or None when it stays."""
    t = field.type
    if not isinstance(t, pa.BaseExtensionType):
        return None
    if getattr(t, "type_name", None) == "numeric":
        return _decimal(field)
    return t.storage_type


def to_arrow(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """``reader`` with its opaque columns converted, one batch at a time."""
    targets = [_target(f) for f in reader.schema]
    if not any(t is not None for t in targets):
        return reader
    schema = pa.schema(
        [
            pa.field(f.name, t or f.type, f.nullable)
            for f, t in zip(reader.schema, targets, strict=True)
        ]
    )

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            arrays: list[Any] = []
            for col, t in zip(batch.columns, targets, strict=True):
                if t is None:
                    arrays.append(col)
                else:
                    storage = getattr(col, "storage", col)
                    arrays.append(pc.cast(storage, t))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())
