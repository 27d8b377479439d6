"""Forward-only changes: a model changed from some period on, and its history deliberately NOT
rebuilt (a new column meaningful only from today; a definition that applies to new periods).

>>> project.forward("fct_daily_sales", "2026-12-01",            # doctest: +SKIP
...                 note="new column meaningful from today; earlier periods unchanged")

The decision goes into the changelog (a row of kind ``forward``, see
:func:`~.changelog.row_kind`) and to OpenLineage and the model's consumers like a publication, so
consumers know why history did not change. :meth:`backfill.Project.avoided_backfill` plans
(and, sampling one partition per model, estimates) the backfill that was not run, so the choice
is an informed one.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
import zoneinfo
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._stamps import who
from .._tables import RowTable
from ..engines import CHANGELOG_COLUMNS, Area, Engine, PublishRequest
from ..engines.registry import engine_for
from ..errors import InvalidInputError, NotFoundError
from .announce import announce, check_announce
from .changelog import FORWARD_PREFIX, Changelog, forward_row
from .notify import Delivery, message

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["ForwardChange", "forward_change", "parse_from"]


@dataclass(frozen=True)
class ForwardChange:
    """A recorded forward-only change."""

    id: str
    model: str
    effective_from: str
    note: str
    reason: str
    recorded_at: str
    recorded_by: str
    deliveries: tuple[Delivery, ...] = ()
    message: str = field(default="", repr=False)

    def __str__(self) -> str:
        text = (
            f"recorded {self.id}: {self.model} changes from {self.effective_from} on; "
            f"history before it is not rebuilt ({self.note})"
        )
        for d in self.deliveries:
            text += f"\n  told {d}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "deliveries": [d.__dict__ for d in self.deliveries]}


def parse_from(project: Project, model: str, value: object) -> dt.datetime:
    """``value`` (ISO date or date-time; naive in the model's time zone) as an aware instant;
    InvalidInputError naming it otherwise. NotFoundError for an unknown model."""
    if model not in project.models:
        raise NotFoundError(
            f"model {model!r} is not in {project.name}; models: {', '.join(project.models)}"
        )
    when: dt.datetime
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):
        when = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInputError(
                f"from {value!r} is not an ISO date or date-time (e.g. 2026-12-01)"
            ) from None
    else:
        raise InvalidInputError(f"from {value!r} must be an ISO date or date-time string")
    if when.tzinfo is None:
        when = when.replace(tzinfo=zoneinfo.ZoneInfo(project.models[model].tz))
    return when.astimezone(dt.timezone.utc)


def forward_change(
    project: Project,
    model: str,
    start: object,
    note: str,
    *,
    reason: str | None = None,
    engine: Engine | None = None,
) -> ForwardChange:
    """Records that ``model`` changes from ``start`` on without a backfill of its history; tells
    OpenLineage and the model's consumers (see the module doc)."""
    when_from = parse_from(project, model, start)
    if not isinstance(note, str) or not note.strip():
        raise InvalidInputError(
            f"note {note!r}: say why history is not rebuilt, e.g. 'new "
            "column meaningful from today; earlier periods unchanged'"
        )
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise InvalidInputError(f"reason {reason!r} must be a non-empty string (or left out)")
    check_announce(project)
    engine = engine or engine_for(project)
    fwd_id = f"{FORWARD_PREFIX}{uuid.uuid4().hex[:10]}"
    now = dt.datetime.now(dt.timezone.utc)
    by = who()
    why = reason.strip() if reason else f"forward-only change from {when_from.date()}"
    row = forward_row(fwd_id, now, by, why, note.strip(), model, when_from)
    try:
        engine.publish(project, PublishRequest(fwd_id, Area(fwd_id), (), (row,)))
        entry = Changelog(RowTable([n for n, _ in CHANGELOG_COLUMNS], [row])).publications()[0]
        deliveries = announce(project, engine, entry, by)
    finally:
        engine.close()
    change = ForwardChange(
        fwd_id,
        model,
        when_from.isoformat(timespec="seconds"),
        note.strip(),
        why,
        now.isoformat(timespec="seconds"),
        by,
        tuple(deliveries),
        message(project.name, entry),
    )
    log.info("%s", change)
    return change
