"""Iceberg table maintenance for ``backfill gc``: snapshots expire, small files are compacted.

Every Iceberg commit is a snapshot, and a backfill commits once per task: a year of daily
partitions is hundreds of snapshots and small files per table. What publish replaced stays
readable through the snapshot main had before (a rollback reads it by time travel), so a
snapshot is expired only when it is older than the retention AND no live rollback needs it.
Compaction (``rewrite_data_files``, ``rewrite_manifests``) rewrites files, not rows: published
fingerprints do not change, so a later rollback's check still holds.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .sql import arrow_rows, quote

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project
    from .engine import SparkEngine

log = logging.getLogger(__name__)

__all__ = ["maintain"]

_UTC = dt.timezone.utc


def maintain(
    engine: SparkEngine,
    project: Project,
    keep: Mapping[str, Sequence[int]],
    older_than: dt.datetime,
) -> list[str]:
    """Expires each published table's snapshots older than ``older_than`` but those ``keep``
    names for its model (and every one after them), compacts its data files and manifests;
    returns a line per table saying what it freed."""
    spark = engine._job("backfill: table maintenance")
    cat = quote(engine.catalog)
    out = []
    for model in project.topological_order():
        table = engine.table(model)
        if not engine.exists(table):
            continue
        ident = table.split(".", 1)[1].replace("`", "")
        cutoff = older_than.astimezone(_UTC)
        t = engine.iceberg_table(table)
        for snapshot in keep.get(model, ()):
            found = t.snapshot(int(snapshot))
            if found is not None:
                made = dt.datetime.fromtimestamp(int(found.timestampMillis()) / 1000, _UTC)
                cutoff = min(cutoff, made)
        at = cutoff.strftime("%Y-%m-%d %H:%M:%S.%f")
        with engine.lock(table):
            expired = arrow_rows(
                spark,
                f"CALL {cat}.system.expire_snapshots(table => '{ident}', "
                f"older_than => TIMESTAMP '{at}', retain_last => 1)",
            )[0]
            files = arrow_rows(spark, f"CALL {cat}.system.rewrite_data_files(table => '{ident}')")
            manifests = arrow_rows(spark, f"CALL {cat}.system.rewrite_manifests('{ident}')")
        deleted = int(str(expired[0] or 0)) + int(str(expired[1] or 0))
        rewritten, added = (int(str(v or 0)) for v in files[0][:2]) if files else (0, 0)
        m_old, m_new = (int(str(v or 0)) for v in manifests[0][:2]) if manifests else (0, 0)
        line = (
            f"{model}: snapshots before {cutoff:%Y-%m-%d %H:%M} UTC expired ({deleted} data and "
            f"delete file(s) removed); {rewritten} small data file(s) compacted into {added}; "
            f"{m_old} manifest(s) rewritten into {m_new}"
        )
        log.info("%s", line)
        out.append(line)
    return out
