"""backfill: plan, run, audit and publish partition-scoped backfills of data pipelines."""

from __future__ import annotations

import logging

from ._version import __version__ as __version__  # re-exported: backfill.__version__
from .errors import BackfillError, ConflictError, CycleError, InvalidInputError, NotFoundError

try:
    from . import _core  # noqa: F401
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "backfill's C++ extension (backfill._core) is not built. From a source checkout run "
        "`make test` (or `pip install .`); it needs the Debian packages listed in the Makefile."
    ) from exc

from ._arrow import ArrowTable
from .api import Backfill, Project
from .audit import (
    AuditReport,
    DiffResult,
    DiffSummary,
    Fingerprint,
    GateResult,
    ModelAudit,
    TablesDiffResult,
    diff,
    diff_tables,
    fingerprint,
)
from .calendar import GRAINS, Partition, PeriodSet, partition_of, partitions, tz_database
from .checks import check_model
from .engines import Engine
from .engines.duckdb import DuckDBEngine
from .lint import Finding, LintResult, lint_file, lint_sql
from .model import Dependency, Model, ProjectError, Source, all_of, overlap, window
from .plan import Estimate, ModelSummary, Plan, PlanFinding
from .publish import Changelog, Publication
from .run import BackfillStatus
from .run.estimate import EstimateReport, estimate

# Ledger is SqliteLedger's former name, kept: it has been public API since the first release.
from .run.ledger import Ledger, LedgerBackend, SqliteLedger, open_ledger

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "GRAINS",
    "ArrowTable",
    "AuditReport",
    "Backfill",
    "BackfillError",
    "BackfillStatus",
    "Changelog",
    "ConflictError",
    "CycleError",
    "Dependency",
    "DiffResult",
    "DiffSummary",
    "DuckDBEngine",
    "Engine",
    "Estimate",
    "EstimateReport",
    "Finding",
    "Fingerprint",
    "GateResult",
    "InvalidInputError",
    "Ledger",
    "LedgerBackend",
    "LintResult",
    "Model",
    "ModelAudit",
    "ModelSummary",
    "NotFoundError",
    "Partition",
    "PeriodSet",
    "Plan",
    "PlanFinding",
    "Project",
    "ProjectError",
    "Publication",
    "Source",
    "SqliteLedger",
    "TablesDiffResult",
    "all_of",
    "check_model",
    "diff",
    "diff_tables",
    "estimate",
    "fingerprint",
    "lint_file",
    "lint_sql",
    "open_ledger",
    "overlap",
    "partition_of",
    "partitions",
    "tz_database",
    "window",
]
