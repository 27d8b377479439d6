"""Telling the world about a change to published history, after it happened: OpenLineage events
(:mod:`.lineage`), the named consumers' messages (:mod:`.notify`), and a changelog row per
delivery (kind ``delivery``, see :func:`~.changelog.row_kind`), so that who was told, and who
could not be, is on record beside the change.

Nothing here raises: the change is already published (or recorded); a failure to tell someone is
logged and recorded, never a reason to undo it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..engines import Area, Engine, PublishRequest
from ..model.consumers import NotifySettings
from .changelog import delivery_row
from .notify import Delivery, deliveries

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["announce", "check_announce"]


def check_announce(project: Project) -> None:
    """Checks, before a change, that what telling about it needs is installed."""
    if project.settings is not None and project.settings.lineage is not None:
        from .lineage import require_openlineage

        require_openlineage()


def announce(
    project: Project, engine: Engine, entry: Mapping[str, Any], who: str
) -> list[Delivery]:
    """Emits the entry's lineage events, tells its consumers and records every delivery."""
    settings = project.settings
    notify = (settings.notify if settings else None) or NotifySettings()
    out: list[Delivery] = []
    # Each delivery catches the failures of its far side (notify.DELIVERY_ERRORS) and returns
    # them; what reaches these two handlers is a bug of ours. They stay broad because the change
    # is already published: a bug in telling about it must not make it look failed (nor keep
    # the consumers' messages from going out when the lineage events could not). Logged with
    # its traceback, as the bug it is.
    if settings is not None and settings.lineage is not None:
        try:
            from .lineage import emit

            out += emit(
                project,
                settings.lineage,
                entry,
                retries=notify.retries,
                backoff=notify.backoff,
                timeout=notify.timeout,
            )
        except Exception:
            log.exception(
                "bug: emitting the OpenLineage events of %s failed; the change stands",
                entry["publication_id"],
            )
    try:
        for d in deliveries(notify, project.name, entry):
            out.append(d)  # one at a time: those before a bug are still recorded
    except Exception:
        log.exception(
            "bug: telling consumers about %s failed; the change stands", entry["publication_id"]
        )
    for d in out:
        (log.info if d.ok else log.error)("%s: %s", entry["publication_id"], d)
    if out:
        now = dt.datetime.now(dt.timezone.utc)
        rows = tuple(
            delivery_row(
                entry["publication_id"],
                entry["backfill_id"],
                now,
                who,
                d.channel,
                d.consumer,
                d.ok,
                d.detail(),
            )
            for d in out
        )
        try:  # a request without models appends only changelog rows
            engine.publish(
                project,
                PublishRequest(entry["publication_id"], Area(entry["publication_id"]), (), rows),
            )
        except Exception:
            # Broad on purpose: the engines' failures share no base class (duckdb.Error,
            # psycopg.Error, Py4JJavaError...), and neither they nor a bug of ours may make the
            # published change look failed. The traceback tells a bug from a lost connection.
            log.exception(
                "could not record the deliveries of %s in the changelog: %s",
                entry["publication_id"],
                "; ".join(map(str, out)),
            )
    return out
