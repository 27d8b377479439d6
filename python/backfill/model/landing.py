"""Landing sources: sources whose records a *landing model* reads from outside the warehouse
(a Kafka topic, :mod:`backfill.integrations.kafka`), found by name through the
``backfill.sources`` entry-point group, the way engines are found through ``backfill.engines``.

>>> kind = source_kind("kafka")                   # the key of the source in backfill.yml
>>> settings = kind(raw, source="raw.orders", lands_in=None, root=root)   # doctest: +SKIP
>>> landing_models(project)                       # model -> its LandingSource  # doctest: +SKIP

Why a seam, and why this one: the core stages ask only four things of such a source, and these
are the whole :class:`LandingSource` protocol:

* the model stage builds it from the source's mapping in the project file (:func:`source_kind`)
  and declares its landing model (``lands_in``, ``time_column``);
* planning checks that a planned period's records are still retained
  (:meth:`LandingSource.check_retention`, whose findings join the plan's);
* the run stage reads a landing task's period as Arrow rows for the engine to land
  (:meth:`LandingSource.read_period`; the ledger keeps the returned ``detail``);
* the changelog names the rows that operations on the source write (``changelog_names``).

The broker client, consumer groups and offset resets stay inside the integration, which only
the CLI (above every stage) calls. So model, plan, run, audit, publish and the engines import
no integration (import-linter checks it); the protocol lives here, in the lowest stage, because
the model stage is the first to hold a landing source (in its landing model's ``meta``).
"""

from __future__ import annotations

import datetime as dt
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._extras import extra_required
from ..errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from ..engines.base import DeadLetters

    # What a plan keeps of a retention check is the plan stage's to say; the model stage,
    # below it, names that type for the type checker only.
    from ..plan.retention import RetentionCheck
    from .project import Project

__all__ = [
    "SOURCES_GROUP",
    "LandingSource",
    "SourceKind",
    "landing_models",
    "source_kind",
    "source_kind_names",
]

#: The entry-point group of landing source kinds (name: the source's key in the project file).
SOURCES_GROUP = "backfill.sources"


@runtime_checkable
class LandingSource(Protocol):
    """What a landing model's ``meta["landing"]`` holds: its source's settings and reads."""

    @property
    def source(self) -> str: ...

    @property
    def lands_in(self) -> str:
        """The landing model's name."""
        ...

    @property
    def time_column(self) -> str:
        """The landing table's event-time column."""
        ...

    @property
    def changelog_names(self) -> tuple[str, ...]:
        """The names changelog rows about this source carry (besides the models')."""
        ...

    def check_retention(
        self, model: str, start: dt.datetime, end: dt.datetime, *, now: dt.datetime | None
    ) -> RetentionCheck:
        """Whether the records of [start, end) are still retained (findings say what not)."""
        ...

    def read_period(
        self, model: str, start: dt.datetime, end: dt.datetime
    ) -> tuple[Any, dict[str, Any], DeadLetters | None]:
        """The landing rows of [start, end) (Arrow), what was read (kept by the ledger) and,
        when the source has a dead-letter table, the period's dead letters."""
        ...


class SourceKind(Protocol):
    """An entry point of ``backfill.sources``: a source's mapping -> its LandingSource."""

    def __call__(
        self, raw: object, *, source: str, lands_in: str | None, root: Path | None
    ) -> LandingSource: ...


def source_kind_names() -> tuple[str, ...]:
    """The installed source kinds: each is also the key of such a source in the project file."""
    return tuple(sorted({ep.name for ep in entry_points(group=SOURCES_GROUP)}))


def source_kind(name: str) -> SourceKind:
    """The installed source kind ``name`` (InvalidInputError naming the installed ones)."""
    found = {ep.name: ep for ep in entry_points(group=SOURCES_GROUP)}
    if name not in found:
        raise InvalidInputError(
            f"source kind {name!r} is not installed; installed: "
            f"{', '.join(sorted(found)) or 'none (reinstall backfill)'}"
        )
    with extra_required(f"source kind {name!r}"):
        kind: SourceKind = found[name].load()
    return kind


def landing_models(project: Project) -> dict[str, LandingSource]:
    """The project's landing models (model -> its source's settings)."""
    return {
        name: landing
        for name, m in project.models.items()
        if isinstance(landing := m.meta.get("landing"), LandingSource)
    }
