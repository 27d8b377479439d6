"""The audit stage: per-partition fingerprints in the engine, the C++ diff of the differing
partitions, gates, and the report."""

from __future__ import annotations

from .audit import audit_backfill, audit_model
from .crossdiff import TablesDiffResult, diff_tables
from .diff import DiffResult, DiffSummary, diff
from .fingerprint import Fingerprint, fingerprint
from .gates import GateResult
from .keys import Version, choose_key
from .report import AuditReport, ModelAudit, PartitionAudit
from .run_twice import RunTwiceReport, check_run_twice

__all__ = [
    "AuditReport",
    "DiffResult",
    "DiffSummary",
    "Fingerprint",
    "GateResult",
    "ModelAudit",
    "PartitionAudit",
    "RunTwiceReport",
    "TablesDiffResult",
    "Version",
    "audit_backfill",
    "audit_model",
    "check_run_twice",
    "choose_key",
    "diff",
    "diff_tables",
    "fingerprint",
]
