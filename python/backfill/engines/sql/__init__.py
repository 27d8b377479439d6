"""The engine core (:mod:`.core`) and the dialect (:mod:`.dialect`) every SQL engine supplies."""

from __future__ import annotations

from .core import (
    AuditScope,
    SqlEngine,
    Written,
    audit_schema,
    task_parts,
    version_of_row,
    version_order,
    writes_period,
)
from .dialect import Dialect, Rel

__all__ = [
    "AuditScope",
    "Dialect",
    "Rel",
    "SqlEngine",
    "Written",
    "audit_schema",
    "task_parts",
    "version_of_row",
    "version_order",
    "writes_period",
]
