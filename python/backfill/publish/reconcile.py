"""Bringing the ledger level with the warehouse after a process died between the two.

A publish (or rollback) commits in the warehouse first -- the swap, what it kept
(``backfill_versions``) and the changelog rows in one transaction -- and records itself in the
ledger after. A process killed in between leaves the warehouse published and the ledger not
knowing: the backfill still ``done``, the publication taken back still live. Publish, rollback
and gc first call :func:`reconcile`, which records every publication the warehouse holds and the
ledger lacks, from the warehouse's own record of it, so the two agree again before anything
else is decided.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .._tables import RowTable
from ..engines import CHANGELOG_COLUMNS, Engine
from ..run import LedgerBackend
from ..run.ledger import KeptVersion
from .changelog import Changelog

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["reconcile"]


def reconcile(project: Project, ledger: LedgerBackend, engine: Engine) -> list[str]:
    """Records in the ledger the publications and rollbacks the warehouse committed and the
    ledger lacks; returns their ids."""
    recorded: list[str] = []
    known = {k.publication_id for k in ledger.kept_versions()}  # one read, not one per version
    for version in engine.published_versions(project):
        if version.publication_id in known:
            continue
        kept = KeptVersion(
            publication_id=version.publication_id,
            backfill_id=version.backfill_id,
            kind="rollback" if version.rolls_back else "publish",
            rolls_back=version.rolls_back,
            published_at=version.published_at,
            keep_until=version.keep_until,
            models=version.models,
            rolled_back_by=None,
            dropped_at=None,
        )
        if version.rolls_back:
            ledger.record_rollback(kept)
        else:
            entry = _entry(project, engine, version.publication_id, version.backfill_id)
            ledger.record_publication(
                version.backfill_id,
                {
                    "publication_id": version.publication_id,
                    "published_at": version.published_at,
                    "published_by": entry.get("published_by") or "unknown",
                    "note": entry.get("note") or "",
                    "forced_reason": entry.get("forced_reason"),
                    "models": {
                        m: list(v.get("changed_partitions", []))
                        for m, v in entry.get("models", {}).items()
                    },
                },
                kept=kept,
            )
            engine.drop_area(version.backfill_id)
        log.warning(
            "%s was committed in the warehouse but not recorded in the ledger (the process "
            "stopped in between): recorded it now",
            version.publication_id,
        )
        recorded.append(version.publication_id)
    return recorded


def _entry(
    project: Project, engine: Engine, publication_id: str, backfill_id: str
) -> dict[str, Any]:
    """The changelog entry of ``publication_id`` (empty when it has no rows)."""
    rows = engine.changelog_rows(project, backfill_id)
    names = [n for n, _ in CHANGELOG_COLUMNS]
    entries = Changelog(RowTable(names, rows)).publications()
    return next((e for e in entries if e["publication_id"] == publication_id), {})
