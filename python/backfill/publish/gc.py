"""``backfill gc``: drop what publications kept past their retention, and maintain tables.

>>> print(project.gc())                                           # doctest: +SKIP

A publication keeps what it replaced until ``keep_until`` (``publish: {keep: 30d}``); after
that its backup is garbage: gc drops it (the backup schema on DuckDB and PostgreSQL) and records
the drop, after which a rollback of it is refused with the date it expired. Backups still within
their retention are never touched. On Iceberg, where the old rows are the snapshot main had
before each publish, gc expires snapshots older than the retention except those a live rollback
reads, and compacts the small files and manifests many small commits leave.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engines import Engine
from ..model.files import DEFAULT_KEEP_SECONDS
from ..run import LedgerBackend
from .reconcile import reconcile

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["GcReport", "collect_garbage"]


@dataclass(frozen=True)
class GcReport:
    """What ``gc`` dropped (publication id -> rows its backup held, None when unknown), what
    it kept (publication id -> until when), and the table maintenance it did."""

    dropped: dict[str, int | None] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    maintenance: tuple[str, ...] = ()
    dry_run: bool = False

    def __str__(self) -> str:
        verb = "would drop" if self.dry_run else "dropped"
        lines = []
        if self.dropped:
            rows = sum(r or 0 for r in self.dropped.values())
            lines.append(
                f"{verb} the expired backups of {len(self.dropped)} publication(s), "
                f"{rows} row(s): {', '.join(self.dropped)}"
            )
        else:
            lines.append("no expired backups")
        for pid, until in self.kept.items():
            lines.append(f"  kept {pid}: can be rolled back until {until}")
        lines += [f"  {m}" for m in self.maintenance]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "maintenance": list(self.maintenance)}


def collect_garbage(
    project: Project,
    ledger: LedgerBackend,
    engine: Engine,
    *,
    now: dt.datetime | None = None,
    dry_run: bool = False,
) -> GcReport:
    """Drops the backups whose retention ended (see the module doc); ``dry_run`` only says
    what it would drop."""
    now = now or dt.datetime.now(dt.timezone.utc)
    reconcile(project, ledger, engine)
    dropped: dict[str, int | None] = {}
    kept: dict[str, str] = {}
    live: dict[str, list[int]] = {}
    for version in ledger.kept_versions():
        if version.dropped_at or version.keep_until is None:
            continue
        if now < dt.datetime.fromisoformat(version.keep_until):
            kept[version.publication_id] = version.keep_until
            for m in version.models:
                if m.snapshot is not None:
                    live.setdefault(m.model, []).append(m.snapshot)
            continue
        dropped[version.publication_id] = engine.backup_rows(version.publication_id)
        if not dry_run:
            engine.drop_backup(version.publication_id)
            ledger.mark_dropped(version.publication_id, now.isoformat(timespec="seconds"))
            log.info("dropped the expired backup of %s", version.publication_id)
    maintenance: list[str] = []
    if not dry_run:
        keep = project.settings.keep_seconds if project.settings else DEFAULT_KEEP_SECONDS
        maintenance = engine.maintain(project, live, now - dt.timedelta(seconds=keep))
    engine.close()
    return GcReport(dropped, kept, tuple(maintenance), dry_run)
