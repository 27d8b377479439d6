"""The publish stage: the atomic swap into the published tables and the consumers' changelog."""

from __future__ import annotations

from .changelog import Changelog, changelog
from .publish import (Publication, discard_backfill, latest_audit, publish_backfill,
                      recorded_publication)

__all__ = ["Changelog", "Publication", "changelog", "discard_backfill", "latest_audit",
           "publish_backfill", "recorded_publication"]
