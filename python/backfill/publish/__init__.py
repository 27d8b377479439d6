"""The publish stage: the atomic swap into the published tables, the consumers' changelog,
forward-only changes, rollbacks, and telling consumers (OpenLineage, webhooks, e-mail)."""

from __future__ import annotations

from .changelog import Changelog, changelog, row_kind
from .changelog_format import FORMATS
from .forward import ForwardChange, forward_change, parse_from
from .gc import GcReport, collect_garbage
from .notify import Delivery, message
from .publish import (
    Publication,
    discard_backfill,
    latest_audit,
    publish_backfill,
    recorded_publication,
)
from .rollback import Rollback, kept_summary, rollback_publication

__all__ = [
    "FORMATS",
    "Changelog",
    "Delivery",
    "ForwardChange",
    "GcReport",
    "Publication",
    "Rollback",
    "changelog",
    "collect_garbage",
    "discard_backfill",
    "forward_change",
    "kept_summary",
    "latest_audit",
    "message",
    "parse_from",
    "publish_backfill",
    "recorded_publication",
    "rollback_publication",
    "row_kind",
]
