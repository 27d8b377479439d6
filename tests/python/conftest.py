"""Shared pytest configuration and fixtures."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI runs are reproducible (derandomized); local runs explore new examples each time.
settings.register_profile(
    "backfill",
    deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("backfill")
