"""Publish on Spark + Iceberg: table by table, all-or-nothing by rollback.

Iceberg commits one table at a time, so publish cannot be one transaction (the engine declares
``atomic_publish=False``). It goes:

1. For every model, compare the published (main) fingerprints of its backfilled partitions with
   those recorded at audit time; any difference raises StalePublishedError before anything
   changes (someone else published: re-audit).
2. In dependency order, record main's current snapshot id of the model's table, then move main:
   ``CALL system.fast_forward(table, 'main', 'audit_<id>')`` when main is still an ancestor of
   the branch (nothing was published since the branch was made: a metadata-only commit). When
   main moved on (another backfill published other periods since), fast-forwarding would undo
   that publication, so the backfilled periods are copied from the branch into main instead in
   one commit (overwrite by the periods' filter; ``MERGE INTO`` for a merge model; the whole
   table for a full one).
3. If any table fails, every table already moved is set back to its recorded snapshot
   (``system.set_current_snapshot``) before the error is raised: the published tables end as
   they were.
4. The changelog rows are appended to the Iceberg table ``backfill_changelog`` last; if that
   fails, the tables are rolled back too. The branches are dropped afterwards (by the publish
   stage, through ``drop_area``).

What a reader sees: each table switches at its own commit, in dependency order, so for the
seconds publish takes a reader may see an upstream table new and a downstream table old (never a
half-written table). The changelog row appears after every table is new: a consumer that waits
for it sees the whole publication.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...errors import ConflictError
from ..base import PublishModel, PublishRequest
from .sql import DIALECT, kind_of, quote

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project
    from .engine import SparkEngine

log = logging.getLogger(__name__)

__all__ = ["Moved", "publishing", "swap"]

_publishing = threading.Lock()  # one publish at a time per process
Moved = tuple[str, int | None]  # a table moved by a publish, and main's snapshot before


@contextlib.contextmanager
def publishing(engine: SparkEngine, request: PublishRequest) -> Iterator[list[Moved]]:
    """The core's publish flow (stale checks, a swap per model, the changelog) runs inside: one
    publish at a time in this process, and the tables moved so far (the list it yields, which
    :func:`swap` fills) go back to their snapshots when it fails."""
    engine._job(f"backfill: publish {request.backfill_id}")  # names this thread's Spark jobs
    with _publishing:
        done: list[Moved] = []
        try:
            yield done
        except BaseException:
            # Whatever stopped the publish (a Spark error, a bug, Ctrl-C), the tables moved so
            # far go back first, then the same error goes on: nothing is caught. Not a finally:
            # only a failed publish rolls back.
            for table, before in reversed(done):
                _restore(engine, table, before)
            raise


def swap(
    engine: SparkEngine, project: Project, pm: PublishModel, branch: str, done: list[Moved]
) -> None:
    """Moves main of ``pm``'s table to the backfill's branch, recording main's snapshot before
    in ``done``."""
    table = engine.table(pm.model)
    if not engine.has_branch(table, branch):
        return  # nothing written for this model
    with engine.lock(table):
        before = engine.snapshot_of(table)
        _move(engine, project, pm, table, branch)
        done.append((table, before))
    log.info("published %s (was snapshot %s)", pm.model, before)


def _restore(engine: SparkEngine, table: str, snapshot: int | None) -> None:
    ident = _ident(engine, table)
    try:
        with engine.lock(table):
            if snapshot is None:  # the table had no snapshot: empty it again
                engine.spark.sql(f"DELETE FROM {table}")
            else:
                engine.spark.sql(
                    f"CALL {quote(engine.catalog)}.system.set_current_snapshot("
                    f"'{ident}', {snapshot})"
                )
        log.warning("publish failed: %s set back to snapshot %s", table, snapshot)
    except Exception:
        # Broad on purpose: this runs while another error propagates, and every table still to
        # set back must be tried whatever failed here (a Spark error or a bug); the log names
        # what failed (type, message, traceback) and how to finish by hand, and the publish
        # still raises its original error.
        log.exception(
            "publish failed and %s could NOT be set back to snapshot %s; set it "
            "back by hand: CALL system.set_current_snapshot('%s', %s)",
            table,
            snapshot,
            ident,
            snapshot,
        )


def _ident(engine: SparkEngine, table: str) -> str:
    """``schema.table`` as Iceberg procedures take it."""
    return table.split(".", 1)[1].replace("`", "")


def _move(engine: SparkEngine, project: Project, pm: PublishModel, table: str, branch: str) -> None:
    spark = engine.spark
    main = engine.snapshot_of(table)
    head = engine.snapshot_of(table, branch)
    cat = quote(engine.catalog)
    if main is None or (head is not None and engine.is_ancestor(table, main, head)):
        spark.sql(f"CALL {cat}.system.fast_forward('{_ident(engine, table)}', 'main', '{branch}')")
        return
    m = project.models[pm.model]
    source = f"{table}.{quote('branch_' + branch)}"
    old = engine._types(table)
    new = engine._types(source)
    if old != new:
        raise ConflictError(
            f"{pm.model}: the backfill changes its columns "
            f"({sorted(set(old) ^ set(new))}); publishing some partitions "
            "cannot change a table's schema -- rebuild the model directly"
        )
    from pyspark.sql import functions as F

    if m.strategy == "full" or not pm.parts or not m.event_time:
        spark.table(source).writeTo(table).overwrite(F.lit(True))
        return
    cond = DIALECT.in_periods(
        m.event_time, [(s, e) for _, s, e in pm.parts], kind_of(old.get(m.event_time, ""))
    )
    rows = spark.table(source).where(F.expr(cond))
    if m.strategy == "merge" and m.unique_key:
        engine._merge_df(spark, m, rows, table)  # as a merge task's write
        return
    rows.writeTo(table).overwrite(F.expr(cond))
