"""The audit stage: per-partition fingerprints in the engine, the C++ diff of the differing
partitions, gates, and the report."""

from __future__ import annotations

from .audit import audit_backfill, audit_model
from .check import CheckReport, check_run_twice
from .diff import DiffResult, DiffSummary, diff
from .fingerprint import Fingerprint, fingerprint
from .gates import GateResult
from .keys import Version, choose_key
from .report import AuditReport, ModelAudit, PartitionAudit

__all__ = [
    "AuditReport",
    "CheckReport",
    "DiffResult",
    "DiffSummary",
    "Fingerprint",
    "GateResult",
    "ModelAudit",
    "PartitionAudit",
    "Version",
    "audit_backfill",
    "audit_model",
    "check_run_twice",
    "choose_key",
    "diff",
    "fingerprint",
]
