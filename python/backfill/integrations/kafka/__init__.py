"""Kafka sources: replaying a period of a topic into a landing model, checking that the log
still retains it, and moving consumer groups back (the ``kafka`` extra: confluent-kafka).

>>> plan = project.plan("source:kafka.orders+", "2026-11-01", "2026-11-08")   # doctest: +SKIP
>>> plan.replay[0]        # per partition: log start, oldest retained time, from/to, records

:mod:`.settings` checks a source's ``kafka:`` mapping (:class:`KafkaSettings`), :mod:`.source`
adds the reads the stages call (:class:`KafkaSource`), :mod:`.client`
talks to the broker, :mod:`.retention` checks a planned period, :mod:`.landing` reads a landing
task's records, :mod:`.groups` and :mod:`.offsets` reset consumer groups.

Registered like the other integrations, through an entry point (``backfill.sources``, name
``kafka``: :func:`kafka_source`), rather than imported by the stages. The stages need only
what :class:`backfill.model.landing.LandingSource` says (build the settings, check retention,
read a period, name changelog rows), and :class:`KafkaSource` is one; so model, plan, run,
audit, publish and the engines import nothing of this package (an import-linter contract), and
a second streaming source would be a second entry point, not a change to each stage.
"""

from __future__ import annotations

from .offsets import (
    PlannedReset,
    apply_group_reset,
    kafka_sources,
    plan_group_reset,
    topic_settings,
)
from .settings import KafkaSettings, kafka_settings
from .source import KafkaSource, kafka_source

__all__ = [
    "KafkaSettings",
    "KafkaSource",
    "PlannedReset",
    "apply_group_reset",
    "kafka_settings",
    "kafka_source",
    "kafka_sources",
    "plan_group_reset",
    "topic_settings",
]
