"""The DuckDB engine, the embedded default (see :mod:`.engine`)."""

from __future__ import annotations

from .engine import DuckDBEngine
from .sql import audit_schema, quote

__all__ = ["DuckDBEngine", "audit_schema", "quote"]
