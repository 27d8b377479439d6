"""The PostgreSQL engine (see :mod:`.engine`): psycopg 3 with a pool, Arrow through ADBC."""

from __future__ import annotations

from .connection import PostgresConnectionError, mask_url
from .engine import PostgresEngine
from .sql import audit_schema, quote

__all__ = ["PostgresConnectionError", "PostgresEngine", "audit_schema", "mask_url", "quote"]
