"""Publish and discard.

>>> bf.publish(note="revenue from 1 Aug was overstated by ~2%")     # doctest: +SKIP
>>> print(project.changelog())                                       # doctest: +SKIP

``publish`` asks the engine to swap every backfilled partition of every model of the backfill
into the published tables together with the consumers' changelog rows (see
:meth:`backfill.engines.Engine.publish` for what each engine guarantees: DuckDB does it in ONE
transaction, so a reader sees all old or all new), records the publication in the ledger and
drops the audit area.

It refuses (``ConflictError``) when:

* the latest audit failed a gate, unless ``force_reason`` says why it is right anyway (recorded);
* there is no audit, or the backfill's tasks changed its audit area since (re-run -> re-audit);
* the published tables changed since the audit (someone else published over the same periods):
  the engine compares the fingerprints recorded at audit time inside the swap, so nothing can
  slip in between the check and the swap. Re-audit, then publish;
* the backfill was cancelled (``BackfillCancelledError``, naming who and why), checked on entry
  and again right before the swap, so a cancel that lands during the audit checks still stops
  it (the ledger would refuse the publication afterwards too, but the tables would be swapped).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._stamps import who
from .._tables import RowTable
from ..engines import (
    CHANGELOG_COLUMNS,
    Part,
    PublishModel,
    PublishRequest,
    StalePublishedError,
)
from ..errors import ConflictError, InvalidInputError
from ..fingerprints import PartitionFingerprint
from ..run import BackfillState, LedgerBackend
from ..run.ledger import AuditRecord, BackfillCancelledError, BackfillRecord, KeptVersion
from .announce import announce, check_announce
from .changelog import Changelog, EntryHead, changelog_rows
from .notify import Delivery, message
from .reconcile import reconcile
from .rollback import keep_until

if TYPE_CHECKING:  # pragma: no cover
    from ..run import Backfill

log = logging.getLogger(__name__)

__all__ = [
    "Publication",
    "discard_backfill",
    "latest_audit",
    "publish_backfill",
    "recorded_publication",
]


@dataclass(frozen=True)
class Publication:
    id: str
    backfill_id: str
    published_at: str
    published_by: str
    note: str
    forced_reason: str | None
    models: dict[str, list[str]]  # model -> changed partition labels
    changelog_rows: int
    #: the consumers told and the OpenLineage transports (each ok or failed, with attempts)
    deliveries: tuple[Delivery, ...] = ()
    #: the message consumers receive (each gets the part about the models they are named for)
    message: str = field(default="", repr=False)
    #: until when it can be rolled back (None: ``publish: {keep: 0}`` kept nothing)
    keep_until: str | None = None

    def __str__(self) -> str:
        changed = {m: p for m, p in self.models.items() if p}
        text = (
            f"published {self.backfill_id} as {self.id} at {self.published_at} by "
            f"{self.published_by}: {len(self.models)} model(s), "
            f"{sum(len(p) for p in changed.values())} changed partition(s)"
        )
        if self.forced_reason:
            text += f" (FORCED past failed gates: {self.forced_reason})"
        if self.keep_until:
            text += f"\n  can be rolled back until {self.keep_until}: backfill rollback {self.id}"
        for d in self.deliveries:
            text += f"\n  told {d}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "deliveries": [d.__dict__ for d in self.deliveries]}


def latest_audit(ledger: LedgerBackend, backfill_id: str) -> list[AuditRecord]:
    """The per-model rows of the backfill's latest audit. ConflictError when it was never
    audited."""
    rows = ledger.audits(backfill_id)
    if not rows:
        raise ConflictError(
            f"backfill {backfill_id} has not been audited; run `backfill audit "
            f"{backfill_id}` (bf.audit()) before publishing"
        )
    latest = rows[-1].audit_id
    return [r for r in rows if r.audit_id == latest]


def recorded_publication(ledger: LedgerBackend, backfill_id: str) -> dict[str, Any] | None:
    """The publication recorded for a published backfill (as ``Publication.to_dict()`` minus the
    changelog row count), or None."""
    pubs = ledger.publications(backfill_id)
    if not pubs or ledger.backfill(backfill_id).status is not BackfillState.PUBLISHED:
        return None
    row = pubs[-1]
    return {
        "id": row.publication_id,
        "backfill_id": row.backfill_id,
        "published_at": row.published_at,
        "published_by": row.published_by,
        "note": row.note,
        "forced_reason": row.forced_reason,
        "models": row.models,
    }


def publish_backfill(bf: Backfill, note: str, force_reason: str | None = None) -> Publication:
    """Publishes ``bf`` (see the module doc); returns the :class:`Publication`."""
    if not isinstance(note, str) or not note.strip():
        raise InvalidInputError(
            "publish needs a note for the consumers' changelog, e.g. "
            "note='revenue from 1 Aug was overstated by ~2%'"
        )
    if force_reason is not None and (not isinstance(force_reason, str) or not force_reason.strip()):
        raise InvalidInputError(
            f"force_reason {force_reason!r}: say why publishing past a failed gate is right"
        )
    if bf.mode != "audit":
        raise InvalidInputError(
            f"backfill {bf.id} wrote the published tables directly; there is nothing to publish"
        )
    reconcile(bf.project, bf.ledger, bf.engine)  # a publish that died before the ledger knew
    rec = bf.ledger.backfill(bf.id)
    _refuse_cancelled(bf.id, rec)
    if rec.status is not BackfillState.DONE:
        raise InvalidInputError(
            f"backfill {bf.id} is {rec.status}; only a finished ('done') backfill can be published"
        )
    check_announce(bf.project)
    try:
        return _publish(bf, rec, note.strip(), force_reason.strip() if force_reason else None)
    finally:
        bf.engine.close()  # let other processes (readers, runners) open the warehouse


def _publish(bf: Backfill, rec: BackfillRecord, note: str, forced: str | None) -> Publication:
    project, engine = bf.project, bf.engine
    audits = {a.model: a for a in latest_audit(bf.ledger, bf.id)}
    parts = bf.partitions()
    missing = [m for m in parts if m not in audits]
    if missing:
        raise ConflictError(
            f"the latest audit of {bf.id} did not cover {', '.join(missing)}; "
            f"re-audit first: backfill audit {bf.id}"
        )
    failed = [g for a in audits.values() for g in a.result["gates"] if not g["passed"]]
    if failed and forced is None:
        lines = "\n  ".join(f"{g['model']}: {g['gate']} -- {g['reason']}" for g in failed)
        raise ConflictError(
            f"backfill {bf.id} failed {len(failed)} gate(s); fix it, or publish "
            f"with force_reason='why this is right' (--force REASON):\n  {lines}"
        )
    for model, model_parts in parts.items():
        if not _area_unchanged(bf, model, model_parts, audits[model]):
            raise ConflictError(
                f"the audit area of {model} changed since the audit (a task ran "
                f"again); re-audit first: backfill audit {bf.id}"
            )
    order = [m for m in project.topological_order() if m in parts]
    pub_id = f"pub_{uuid.uuid4().hex[:10]}"
    when = dt.datetime.now(dt.timezone.utc)
    by = who()
    head = EntryHead(pub_id, bf.id, rec.reason, when, by, note, forced)
    rows = [row for m in order for row in changelog_rows(head, audits[m], parts[m])]
    until = keep_until(project, when)
    if until is None:
        log.warning(
            "%s keeps nothing of what it replaces (publish: {keep: 0}): it cannot be rolled back",
            pub_id,
        )
    request = PublishRequest(
        bf.id,
        bf.area,
        tuple(
            PublishModel(
                m,
                tuple(parts[m]),
                audits[m].published_fingerprints,
                audits[m].audit_fingerprints,
                versions=audits[m].versions,
            )
            for m in order
        ),
        tuple(rows),
        publication_id=pub_id if until else None,
        published_at=when.isoformat(timespec="seconds"),
        keep_until=until,
    )
    _refuse_cancelled(bf.id, bf.ledger.backfill(bf.id))  # cancelled while we checked?
    try:
        result = engine.publish(project, request)
    except StalePublishedError as exc:
        shown = ", ".join(exc.labels[:5]) + (", ..." if len(exc.labels) > 5 else "")
        raise ConflictError(
            f"the published {exc.model} changed since the audit of {bf.id} in "
            f"{len(exc.labels)} partition(s) ({shown}): someone else published; re-audit "
            f"first: backfill audit {bf.id}"
        ) from exc
    changed = {
        a.model: [p["label"] for p in a.result["partitions"] if not p["identical"]]
        for a in audits.values()
    }
    published_at = when.isoformat(timespec="seconds")
    bf.ledger.record_publication(
        bf.id,
        {
            "publication_id": pub_id,
            "published_at": published_at,
            "published_by": by,
            "note": note,
            "forced_reason": forced,
            "models": changed,
        },
        kept=KeptVersion(
            publication_id=pub_id,
            backfill_id=bf.id,
            kind="publish",
            rolls_back=None,
            published_at=published_at,
            keep_until=until,
            models=result.kept,
            rolled_back_by=None,
            dropped_at=None,
        ),
    )
    engine.drop_area(bf.id)  # the changelog keeps what changed; the old version is kept apart
    entry = Changelog(RowTable([n for n, _ in CHANGELOG_COLUMNS], rows)).publications()[0]
    deliveries = announce(project, engine, entry, by)
    publication = Publication(
        pub_id,
        bf.id,
        published_at,
        by,
        note,
        forced,
        changed,
        len(rows),
        tuple(deliveries),
        message(project.name, entry),
        until,
    )
    log.info("%s", publication)
    return publication


def _area_unchanged(bf: Backfill, model: str, parts: list[Part], audit: AuditRecord) -> bool:
    """Whether the audit area of ``model`` still holds what the audit fingerprinted. When the
    audit recorded the area's version and the area is still at it (an Iceberg snapshot: the
    branch did not move), it does, without reading a row. Else one fingerprint of the span of
    the partitions (one scan, no per-partition grouping) against the sum of the recorded ones:
    fingerprints add up (see ``PartitionFingerprint.total``), and the area holds rows of its
    partitions only. A mismatch (or an engine whose fingerprints do not add up) falls back to
    comparing partition by partition."""
    seen = audit.versions.get("area")
    if seen is not None and bf.engine.version(bf.project, model, bf.area) == seen:
        log.debug("audit area of %s: version %s unchanged since the audit", model, seen)
        return True
    recorded: Mapping[str, PartitionFingerprint] = audit.audit_fingerprints
    if len(parts) > 1 and set(recorded) == {p[0] for p in parts}:
        span = ("span", min(p[1] for p in parts), max(p[2] for p in parts))
        now = bf.engine.fingerprints(bf.project, model, bf.area, [span])
        if now["span"] == PartitionFingerprint.total(recorded.values()):
            return True
    now = bf.engine.fingerprints(bf.project, model, bf.area, parts)
    return dict(now) == dict(recorded)


def _refuse_cancelled(backfill_id: str, rec: BackfillRecord) -> None:
    if rec.status is BackfillState.CANCELLED:
        raise BackfillCancelledError(
            f"backfill {backfill_id} was cancelled by {rec.cancelled_by} "
            f"({rec.cancel_reason!r}); a cancelled backfill is never published. Its "
            f"audit area stays until: backfill discard {backfill_id}"
        )


def discard_backfill(bf: Backfill) -> None:
    """Drops the audit area of an unpublished backfill and marks it discarded."""
    rec = bf.ledger.backfill(bf.id)
    if rec.status is BackfillState.PUBLISHED:
        raise ConflictError(
            f"backfill {bf.id} is published; discarding it would not undo that "
            "(backfill the period again to change it)"
        )
    if bf.mode != "audit":
        raise InvalidInputError(
            f"backfill {bf.id} wrote the published tables directly; there "
            "is no audit area to discard"
        )
    workers = bf.ledger.live_workers(bf.id)
    if workers:
        raise ConflictError(
            f"backfill {bf.id} has tasks running (workers "
            f"{', '.join(sorted(workers))}); stop its runners first"
        )
    bf.engine.drop_area(bf.id)
    bf.engine.close()
    bf.ledger.set_status(bf.id, BackfillState.DISCARDED, finished=True)
    log.info("discarded backfill %s", bf.id)
