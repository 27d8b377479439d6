"""The publish stage: the atomic swap into the published tables, the consumers' changelog,
forward-only changes, and telling consumers (OpenLineage, webhooks, e-mail)."""

from __future__ import annotations

from .changelog import Changelog, changelog, row_kind
from .changelog_format import FORMATS
from .forward import ForwardChange, forward_change, parse_from
from .notify import Delivery, message
from .publish import (
    Publication,
    discard_backfill,
    latest_audit,
    publish_backfill,
    recorded_publication,
)

__all__ = [
    "FORMATS",
    "Changelog",
    "Delivery",
    "ForwardChange",
    "Publication",
    "changelog",
    "discard_backfill",
    "forward_change",
    "latest_audit",
    "message",
    "parse_from",
    "publish_backfill",
    "recorded_publication",
    "row_kind",
]
