"""backfill: plan, run, audit and publish partition-scoped backfills of data pipelines."""

from __future__ import annotations

import logging

from .errors import BackfillError, ConflictError, CycleError, InvalidInputError, NotFoundError

try:
    from . import _core  # noqa: F401
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "backfill's C++ extension (backfill._core) is not built. From a source checkout run "
        "`make test` (or `pip install .`); it needs the Debian packages listed in the Makefile."
    ) from exc

from .calendar import GRAINS, Partition, PeriodSet, partition_of, partitions
from ._arrow import ArrowTable
from .diffing import DiffResult, DiffSummary, diff
from .fingerprinting import Fingerprint, fingerprint
from .checks import check_model
from .lint import Finding, LintResult, lint_file, lint_sql

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "GRAINS",
    "ArrowTable",
    "DiffResult",
    "DiffSummary",
    "Fingerprint",
    "diff",
    "fingerprint",
    "BackfillError",
    "ConflictError",
    "CycleError",
    "Finding",
    "InvalidInputError",
    "LintResult",
    "NotFoundError",
    "Partition",
    "PeriodSet",
    "check_model",
    "lint_file",
    "lint_sql",
    "partition_of",
    "partitions",
]
