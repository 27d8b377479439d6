"""A Kafka source as the stages see it: its settings plus the reads of the
:class:`~backfill.model.landing.LandingSource` protocol, and the ``backfill.sources`` entry point
that builds it from a source's ``kafka:`` mapping.

>>> src = kafka_source(raw, source="raw.orders", lands_in=None, root=root)   # doctest: +SKIP
>>> src.check_retention("raw_orders", start, end, now=None).findings
>>> rows, detail, dead = src.read_period("raw_orders", start, end)

A subclass of :class:`~.settings.KafkaSettings` rather than methods on it: the retention check
and the landing read build on the settings, so the settings module cannot import them (a cycle).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .landing import read_period
from .retention import SourceCheck, check_source
from .settings import KafkaSettings, kafka_settings

if TYPE_CHECKING:  # pragma: no cover
    from ...engines.base import DeadLetters
    from ...model.landing import SourceKind

__all__ = ["KafkaSource", "kafka_source"]


@dataclasses.dataclass(frozen=True)
class KafkaSource(KafkaSettings):
    """A Kafka source's settings and its reads (what a landing model's ``meta["landing"]``
    holds)."""

    @property
    def changelog_names(self) -> tuple[str, ...]:
        """``kafka:<topic>``: offset resets of the topic are recorded under it."""
        return (f"kafka:{self.topic}",)

    def check_retention(
        self, model: str, start: dt.datetime, end: dt.datetime, *, now: dt.datetime | None
    ) -> SourceCheck:
        """The retention check of [start, end) (:func:`.retention.check_source`)."""
        return check_source(self, model, start, end, now=now)

    def read_period(
        self, model: str, start: dt.datetime, end: dt.datetime
    ) -> tuple[Any, dict[str, Any], DeadLetters | None]:
        """A landing task's read (:func:`.landing.read_period`)."""
        return read_period(self, model, start, end)


def kafka_source(
    raw: object, *, source: str, lands_in: str | None = None, root: Path | None = None
) -> KafkaSource:
    """The ``kafka`` entry point of ``backfill.sources``: :func:`.settings.kafka_settings`
    (InvalidInputError naming the bad value), as a :class:`KafkaSource`."""
    settings = kafka_settings(raw, source=source, lands_in=lands_in, root=root)
    return KafkaSource(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)})


#: The annotation has mypy check that the entry point is a SourceKind, and so that KafkaSource
#: is a LandingSource (which the stages check with isinstance).
SOURCE_KIND: SourceKind = kafka_source
