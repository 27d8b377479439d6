"""The Spark engine on Apache Iceberg (see :mod:`.engine`); needs the ``spark`` extra, Java 17+
and the Iceberg Spark runtime jar (``make setup`` fetches it)."""

from __future__ import annotations

from .engine import SparkEngine
from .session import ICEBERG_ARTIFACT, SparkSetupError

__all__ = ["ICEBERG_ARTIFACT", "SparkEngine", "SparkSetupError"]
