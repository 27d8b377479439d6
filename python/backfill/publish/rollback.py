"""Rollback: take a publication back, within the time it keeps what it replaced.

>>> project.rollback("pub_3f9a0c2b1d", note="the new discount rule was wrong")  # doctest: +SKIP

Every publish keeps what it replaces (:mod:`backfill.versions`; ``publish: {keep: 30d}`` in
backfill.yml). ``rollback`` puts that back, every model of the publication at once (in one
transaction where the engine has them; on Iceberg table by table, in reverse dependency order,
undone together when one fails), after checking under the publish lock that the published
partitions still hold exactly what the publication left (nothing was published or written over
them since). A rollback is itself a publication: its changelog entry carries the deltas new ->
old per model and measure, consumers are told as for a publish, it keeps what it replaced, and it
can be rolled back in turn.

It refuses, changing nothing, when: the publication is unknown, was already rolled back, kept
nothing (``keep: 0``) or its backup expired; its backfill was cancelled or discarded; a backfill
writing the same partitions is running; or the published partitions changed since (it names the
later publication; ``force_reason`` rolls back anyway and says what it overwrote).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._numbers import pct
from .._stamps import who
from .._tables import RowTable
from ..engines import (
    CHANGELOG_COLUMNS,
    PUBLISHED,
    Engine,
    PublishModel,
    PublishRequest,
    StalePublishedError,
)
from ..errors import ConflictError, InvalidInputError, NotFoundError
from ..model.files import DEFAULT_KEEP_SECONDS
from ..run import BackfillState, LedgerBackend
from ..run.ledger import KeptVersion
from ..versions import KeptModel
from .announce import announce, check_announce
from .changelog import ROLLBACK_PREFIX, Changelog
from .notify import Delivery, message
from .reconcile import reconcile

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from ..run.ledger import KeptVersion

log = logging.getLogger(__name__)

__all__ = ["Rollback", "keep_until", "kept_summary", "rollback_publication"]

_NAMES = [n for n, _ in CHANGELOG_COLUMNS]
_COL = {n: i for i, n in enumerate(_NAMES)}
#: pairs of changelog columns a rollback swaps (what was new is old now)
_SWAPPED = (("rows_old", "rows_new"), ("rows_added", "rows_removed"), ("value_old", "value_new"))


@dataclass(frozen=True)
class Rollback:
    """A rollback: ``rolls_back`` taken back as ``id``, the partitions put back per model, and
    those it published over although they had changed (a forced rollback only)."""

    id: str
    rolls_back: str
    backfill_id: str
    rolled_back_at: str
    rolled_back_by: str
    note: str
    forced_reason: str | None
    models: dict[str, list[str]]
    overwritten: dict[str, list[str]] = field(default_factory=dict)
    #: until when this rollback can itself be rolled back (None: it kept nothing)
    keep_until: str | None = None
    deliveries: tuple[Delivery, ...] = ()
    message: str = field(default="", repr=False)

    def __str__(self) -> str:
        parts = sum(len(p) or 1 for p in self.models.values())
        text = (
            f"rolled back {self.rolls_back} (backfill {self.backfill_id}) as {self.id} at "
            f"{self.rolled_back_at} by {self.rolled_back_by}: {len(self.models)} model(s), "
            f"{parts} partition(s) put back"
        )
        if self.forced_reason:
            text += f" (FORCED: {self.forced_reason})"
        for model, labels in self.overwritten.items():
            shown = ", ".join(labels[:5]) + (", ..." if len(labels) > 5 else "")
            text += f"\n  overwrote later changes of {model}: {shown}"
        if self.keep_until:
            text += (
                f"\n  can itself be rolled back until {self.keep_until}: "
                f"backfill rollback {self.id}"
            )
        for d in self.deliveries:
            text += f"\n  told {d}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "deliveries": [d.__dict__ for d in self.deliveries]}

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"


def keep_until(project: Project, when: dt.datetime) -> str | None:
    """Until when a publication made at ``when`` keeps what it replaced (None: ``keep: 0``)."""
    keep = project.settings.keep_seconds if project.settings else DEFAULT_KEEP_SECONDS
    if keep <= 0:
        return None
    return (when + dt.timedelta(seconds=keep)).isoformat(timespec="seconds")


def rollback_publication(
    project: Project,
    ledger: LedgerBackend,
    engine: Engine,
    publication_id: str,
    note: str,
    force_reason: str | None = None,
    *,
    now: dt.datetime | None = None,
) -> Rollback:
    """Takes ``publication_id`` back (see the module doc); returns the :class:`Rollback`."""
    if not isinstance(publication_id, str) or not publication_id.strip():
        raise InvalidInputError(
            f"publication id {publication_id!r}: expected an id such as pub_3f9a0c2b1d "
            "(`backfill changelog` lists them)"
        )
    if not isinstance(note, str) or not note.strip():
        raise InvalidInputError(
            "rollback needs a note for the consumers' changelog, e.g. "
            "note='the new discount rule was wrong'"
        )
    if force_reason is not None and (not isinstance(force_reason, str) or not force_reason.strip()):
        raise InvalidInputError(
            f"force_reason {force_reason!r}: say why overwriting later changes is right"
        )
    now = now or dt.datetime.now(dt.timezone.utc)
    reconcile(project, ledger, engine)  # a publish or rollback that died before the ledger knew
    kept = _rollbackable(ledger, publication_id.strip(), now)
    _refuse_running(project, ledger, kept)
    check_announce(project)
    try:
        return _rollback(project, ledger, engine, kept, note.strip(), force_reason, now)
    finally:
        engine.close()  # let other processes (readers, runners) open the warehouse


def _rollbackable(ledger: LedgerBackend, publication_id: str, now: dt.datetime) -> KeptVersion:
    try:
        kept = ledger.kept_version(publication_id)
    except NotFoundError:
        raise NotFoundError(
            f"no publication {publication_id!r} can be rolled back: none is recorded under that "
            "id (`backfill changelog` lists publications and their ids)"
        ) from None
    if kept.rolled_back_by:
        raise ConflictError(
            f"publication {publication_id} was already rolled back by {kept.rolled_back_by}; "
            f"to publish it again, roll that back: backfill rollback {kept.rolled_back_by}"
        )
    if kept.keep_until is None:
        raise ConflictError(
            f"publication {publication_id} kept nothing of what it replaced (publish: "
            "{keep: 0}); backfill its periods again with the old logic instead"
        )
    if kept.dropped_at or now >= dt.datetime.fromisoformat(kept.keep_until):
        raise ConflictError(
            f"publication {publication_id} can no longer be rolled back: what it replaced was "
            f"kept until {kept.keep_until}"
            + (f" and dropped at {kept.dropped_at}" if kept.dropped_at else "")
            + "; backfill its periods again with the old logic instead"
        )
    status = ledger.backfill(kept.backfill_id).status
    if status in (BackfillState.CANCELLED, BackfillState.DISCARDED):
        raise ConflictError(
            f"publication {publication_id} belongs to backfill {kept.backfill_id}, which is "
            f"{status}: nothing of it is published to roll back"
        )
    return kept


def _refuse_running(project: Project, ledger: LedgerBackend, kept: KeptVersion) -> None:
    """Refuses while a backfill writing the same partitions is pending or running: its tasks
    read and write what the rollback changes."""
    tasks: list[dict[str, Any]] = []
    for km in kept.models:
        if km.restores_nothing:
            continue
        if km.parts:
            tasks += [{"model": km.model, "start": s, "end": e} for _, s, e in km.parts]
        else:  # the whole table
            tasks.append({"model": km.model, "start": None, "end": None})
    if not tasks:
        return
    running = [
        o
        for o in ledger.overlaps(project.name, tasks)
        if o.status in (BackfillState.PENDING.value, BackfillState.RUNNING.value)
    ]
    if running:
        by: dict[str, list[str]] = {}
        for o in running:
            by.setdefault(f"{o.backfill_id} ({o.status}, by {o.created_by})", []).append(o.model)
        listed = "; ".join(f"{b}: {', '.join(models)}" for b, models in by.items())
        raise ConflictError(
            f"backfills writing partitions of {kept.publication_id} are running ({listed}); "
            "wait for them to finish (or cancel them), then roll back"
        )


def _rollback(
    project: Project,
    ledger: LedgerBackend,
    engine: Engine,
    kept: KeptVersion,
    note: str,
    forced: str | None,
    now: dt.datetime,
) -> Rollback:
    rb_id = f"{ROLLBACK_PREFIX}{uuid.uuid4().hex[:10]}"
    by = who()
    rows = _inverted_rows(project, engine, kept, rb_id, now, by, note, forced)
    until = keep_until(project, now)
    request = PublishRequest(
        kept.backfill_id,
        PUBLISHED,
        tuple(
            PublishModel(km.model, km.parts, km.after, restore=km)
            for km in _reverse_order(project, kept.models)
            if not km.restores_nothing  # published unchanged: nothing to put back
        ),
        tuple(rows),
        publication_id=rb_id if until else None,
        restores=kept.publication_id,
        overwrite_stale=forced is not None,
        published_at=now.isoformat(timespec="seconds"),
        keep_until=until,
    )
    try:
        result = engine.publish(project, request)
    except StalePublishedError as exc:
        raise ConflictError(_stale_message(ledger, kept, exc)) from exc
    at = now.isoformat(timespec="seconds")
    ledger.record_rollback(
        KeptVersion(
            publication_id=rb_id,
            backfill_id=kept.backfill_id,
            kind="rollback",
            rolls_back=kept.publication_id,
            published_at=at,
            keep_until=until,
            models=result.kept,
            rolled_back_by=None,
            dropped_at=None,
        )
    )
    overwritten = {m: list(labels) for m, labels in result.overwritten.items()}
    if overwritten:
        log.warning("rollback %s overwrote later changes: %s", rb_id, overwritten)
    entries = Changelog(RowTable(_NAMES, rows)).publications()
    deliveries: list[Delivery] = []
    text = ""
    if entries:
        deliveries = announce(project, engine, entries[0], by)
        text = message(project.name, entries[0])
    rollback = Rollback(
        rb_id,
        kept.publication_id,
        kept.backfill_id,
        at,
        by,
        note,
        forced,
        {
            km.model: [label for label, _, _ in km.parts]
            for km in kept.models
            if not km.restores_nothing
        },
        overwritten,
        until,
        tuple(deliveries),
        text,
    )
    log.info("%s", rollback)
    return rollback


def _reverse_order(project: Project, models: Sequence[KeptModel]) -> list[KeptModel]:
    """Downstream models first (a model no longer in the project last)."""
    rank = {m: i for i, m in enumerate(project.topological_order())}
    return sorted(models, key=lambda km: -rank.get(km.model, -1))


def _inverted_rows(
    project: Project,
    engine: Engine,
    kept: KeptVersion,
    rb_id: str,
    now: dt.datetime,
    by: str,
    note: str,
    forced: str | None,
) -> list[tuple[Any, ...]]:
    """The rollback's changelog rows: the publication's rows with old and new swapped (the
    deltas negated), under the rollback's id, time, author, reason and note."""
    found = [
        r
        for r in engine.changelog_rows(project, kept.backfill_id)
        if r[_COL["publication_id"]] == kept.publication_id and r[_COL["model"]] is not None
    ]
    reason = f"rollback of {kept.publication_id}"
    out = []
    for r in found:
        row = list(r)
        row[_COL["publication_id"]] = rb_id
        row[_COL["published_at"]] = now
        row[_COL["published_by"]] = by
        row[_COL["reason"]] = reason
        row[_COL["note"]] = note
        row[_COL["forced_reason"]] = forced
        for a, b in _SWAPPED:
            row[_COL[a]], row[_COL[b]] = r[_COL[b]], r[_COL[a]]
        delta = r[_COL["delta"]]
        row[_COL["delta"]] = None if delta is None else -delta
        old, new = row[_COL["value_old"]], row[_COL["value_new"]]
        if r[_COL["measure"]] is not None and old is not None and new is not None:
            row[_COL["pct_delta"]] = pct(old, new)
        out.append(tuple(row))
    return out


def _stale_message(ledger: LedgerBackend, kept: KeptVersion, exc: StalePublishedError) -> str:
    """Why a rollback is refused: the later publications over the same model, by name."""
    later = [
        k
        for k in ledger.kept_versions()
        if k.published_at >= kept.published_at
        and k.publication_id != kept.publication_id
        and any(m.model == exc.model for m in k.models)
        and not k.rolled_back_by
    ]
    shown = ", ".join(exc.labels[:5]) + (", ..." if len(exc.labels) > 5 else "")
    who_changed = (
        "publication(s) "
        + ", ".join(
            f"{k.publication_id} (backfill {k.backfill_id}, {k.published_at})" for k in later
        )
        + " published over it since"
        if later
        else "something wrote over it since (a direct backfill or another writer)"
    )
    first = f"; roll back {later[-1].publication_id} first" if later else ""
    return (
        f"cannot roll back {kept.publication_id}: the published {exc.model} changed in "
        f"{len(exc.labels)} partition(s) ({shown}): {who_changed}{first}, or roll back anyway "
        "with force_reason='why' (--force REASON), which overwrites those changes"
    )


def kept_summary(kept: KeptVersion, now: dt.datetime) -> Mapping[str, Any]:
    """Whether and until when a publication can be rolled back, and how many rows it keeps."""
    if kept.rolled_back_by:
        state = f"rolled back by {kept.rolled_back_by}"
    elif kept.keep_until is None:
        state = "kept nothing"
    elif kept.dropped_at or now >= dt.datetime.fromisoformat(kept.keep_until):
        state = f"expired {kept.keep_until}"
    else:
        state = f"can be rolled back until {kept.keep_until}"
    return {
        "publication_id": kept.publication_id,
        "kind": kept.kind,
        "rollback": state,
        "keep_until": kept.keep_until,
        "rows_kept": sum(m.rows for m in kept.models),
    }
