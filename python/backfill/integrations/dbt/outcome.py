"""What a dbt invocation did for a model: its failed batches and dbt's error message."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ...engines import Period

__all__ = ["PERMANENT", "PROGRESS", "outcome", "utc"]

# dbt error messages of failures that repeat identically on a retry.
PERMANENT = (
    "Parser Error",
    "Binder Error",
    "Catalog Error",
    "Conversion Error",
    "Compilation Error",
    "Syntax error",
    "does not exist",
    "not found",
)


# dbt's progress and summary lines in its error log (the messages are the other lines).
PROGRESS = re.compile(
    r"^(Batch \d+ of \d+|\d+ of \d+ |Failure in |ERROR$|Unhandled error|"
    r"Exception on worker|Done\.|Completed with)"
)


def utc(t: dt.datetime) -> dt.datetime:
    """``t`` in UTC (dbt reads naive values as UTC)."""
    return t.astimezone(dt.timezone.utc) if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def outcome(res: Any, node: Any, model: str) -> tuple[list[Period], str | None]:
    """(failed batches, error message or None) of an invocation for ``model``."""
    if res.exception is not None:
        return [], f"model {model!r}: dbt failed: {type(res.exception).__name__}: {res.exception}"
    if node is None:
        return [], f"model {model!r}: dbt ran nothing for it (is it enabled and selected?)"
    status = str(getattr(node.status, "value", node.status))
    batches = getattr(node, "batch_results", None)
    failed = [(utc(a), utc(b)) for a, b in (batches.failed if batches else [])]
    if status in ("success", "pass") and not failed:
        return [], None
    detail = node.message or status
    text = [ln for ln in res.errors.splitlines() if not PROGRESS.match(ln)]
    if text:  # dbt's own error messages (the database's error text)
        detail = " ".join(text[:4])
    if failed:
        detail = f"{len(failed)} batch(es) failed, first {failed[0][0]:%Y-%m-%d %H:%M}: {detail}"
    return failed, f"model {model!r}: dbt run {status}: {detail}"
