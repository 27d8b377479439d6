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
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ...errors import ConflictError
from ...versions import KeptModel, backup_schema
from ..base import PublishModel, PublishRequest
from .sql import DIALECT, kind_of, quote

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project
    from .engine import SparkEngine

log = logging.getLogger(__name__)

__all__ = ["Moved", "kept_of", "publishing", "restore", "swap"]

KEYS = "__keys"  # a merge's kept keys: <model>__keys beside the backup
_publishing = threading.Lock()  # one publish at a time per process
Moved = tuple[str, int | None]  # a table moved by a publish, and main's snapshot before


@contextlib.contextmanager
def publishing(engine: SparkEngine, request: PublishRequest) -> Iterator[list[Moved]]:
    """The core's publish flow (stale checks, a swap per model, the changelog) runs inside: one
    publish at a time in this process, and the tables moved so far (the list it yields, which
    :func:`swap` fills) go back to their snapshots when it fails."""
    what = "rollback" if any(pm.restore is not None for pm in request.models) else "publish"
    label = f"backfill: {what} {request.backfill_id}"
    engine._job(label)  # names this thread's Spark jobs
    with _publishing, engine.phase(label):
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
    engine: SparkEngine,
    project: Project,
    pm: PublishModel,
    branch: str,
    done: list[Moved],
    backup: str | None,
) -> int | None:
    """Moves main of ``pm``'s table to the backfill's branch, recording main's snapshot before
    in ``done``; returns that snapshot (None: main had none). A merge keeps the keys it touches
    in the namespace ``backup`` (the rows they had are main's snapshot before)."""
    table = engine.table(pm.model)
    if not engine.has_branch(table, branch):
        return engine.snapshot_of(table) if engine.exists(table) else None  # nothing written
    with engine.lock(table):
        before = engine.snapshot_of(table)
        m = project.models[pm.model]
        if backup and before is not None and m.strategy == "merge" and m.unique_key:
            source = f"{table}.{quote('branch_' + branch)}"
            where = _periods(engine, project, pm, source)
            _keep_keys(engine, pm.model, tuple(m.unique_key), source, backup, where)
        _move(engine, project, pm, table, branch)
        done.append((table, before))
    log.info("published %s (was snapshot %s)", pm.model, before)
    return before


def kept_of(
    project: Project, pm: PublishModel, before: int | None, stale: Sequence[str] = ()
) -> KeptModel:
    """What a publish of ``pm`` keeps on Iceberg: main's snapshot before it (the rows it
    replaced are read back from it by time travel; of a replace, the partitions that change)."""
    m = project.models[pm.model]
    if before is None:
        return KeptModel(pm.model, "full", existed=False)
    # The rows it replaced, as the audit counted them (they stay in the snapshot: no copy).
    rows = sum(fp.rows for fp in pm.published_fingerprints.values())
    if m.strategy == "full" or not pm.parts or not m.event_time:
        return KeptModel(pm.model, "full", True, rows=rows, snapshot=before)
    if m.strategy == "merge" and m.unique_key:
        keys = tuple(m.unique_key)
        return KeptModel(pm.model, "merge", True, pm.parts, keys, rows=rows, snapshot=before)
    same = pm.unchanged(stale)
    changed = tuple(p for p in pm.parts if p[0] not in same)
    rows = sum(fp.rows for label, fp in pm.published_fingerprints.items() if label not in same)
    return KeptModel(
        pm.model,
        "replace",
        True,
        changed,
        rows=rows,
        snapshot=before,
        unchanged=tuple(sorted(same)),
    )


def restore(
    engine: SparkEngine,
    project: Project,
    pm: PublishModel,
    done: list[Moved],
    restores: str,
    backup: str | None,
) -> KeptModel:
    """Puts back the rows main had in the snapshot that ``pm.restore`` kept (a rollback), in one
    commit of the table; returns what this keeps in turn (main's snapshot before)."""
    from pyspark.sql import functions as F

    then = pm.restore
    assert then is not None
    if then.restores_nothing:
        return KeptModel(pm.model, "replace", True)
    table = engine.table(pm.model)
    with engine.lock(table):
        before = engine.snapshot_of(table) if engine.exists(table) else None
        if not then.existed or then.snapshot is None:
            if before is not None:
                engine.spark.sql(f"DELETE FROM {table}")  # the publication built the table
        elif then.strategy == "merge":
            keys = engine.table(pm.model + KEYS, backup_schema(restores))
            if backup:
                _keep_keys(engine, pm.model, then.keys, keys, backup, "TRUE")
            _merge_back(engine, table, then.snapshot, keys, then.keys)
        else:
            old = engine.spark.sql(f"SELECT * FROM {table} VERSION AS OF {then.snapshot}")
            m = project.models.get(pm.model)
            if then.strategy == "full" or not then.parts or m is None or not m.event_time:
                old.writeTo(table).overwrite(F.lit(True))
            else:
                kind = kind_of(engine.table_types(table).get(m.event_time, ""))
                cond = DIALECT.in_periods(m.event_time, [(s, e) for _, s, e in then.parts], kind)
                old.where(F.expr(cond)).writeTo(table).overwrite(F.expr(cond))
        done.append((table, before))
    log.info("rolled back %s to snapshot %s (was %s)", pm.model, then.snapshot, before)
    if before is None:
        return KeptModel(pm.model, "full", existed=False)
    if then.strategy == "merge" and then.existed:
        return KeptModel(pm.model, "merge", True, then.parts, then.keys, snapshot=before)
    strategy = "replace" if then.strategy == "replace" and then.parts else "full"
    parts = then.parts if strategy == "replace" else ()
    return KeptModel(pm.model, strategy, True, parts, snapshot=before)


def _periods(engine: SparkEngine, project: Project, pm: PublishModel, source: str) -> str:
    """The filter of ``pm``'s periods on ``source`` (TRUE without periods)."""
    m = project.models[pm.model]
    if not pm.parts or not m.event_time:
        return "TRUE"
    kind = kind_of(engine._types(source).get(m.event_time, ""))
    return DIALECT.in_periods(m.event_time, [(s, e) for _, s, e in pm.parts], kind)


def _keep_keys(
    engine: SparkEngine,
    model: str,
    keys: tuple[str, ...],
    source: str,
    backup: str,
    where: str,
) -> None:
    """Keeps the unique ``keys`` of ``source``'s rows matching ``where`` (those a merge touches)
    as the table ``<model>__keys`` of the namespace ``backup``."""
    listed = ", ".join(quote(k) for k in keys)
    engine.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {engine._ns(backup)}")
    engine.spark.sql(
        f"CREATE TABLE {engine.table(model + KEYS, backup)} USING iceberg AS "
        f"SELECT DISTINCT {listed} FROM {source} WHERE {where}"
    )


def _merge_back(
    engine: SparkEngine, table: str, snapshot: int, keys_table: str, keys: tuple[str, ...]
) -> None:
    """Puts back, in one commit, the rows every key of ``keys_table`` had in ``snapshot``: a
    key's row is updated back, deleted when the key had no row then, inserted when it has none
    now."""
    cols = list(engine.table_types(table))
    on_old = " AND ".join(f"o.{quote(k)} = k.{quote(k)}" for k in keys)
    key_cols = ", ".join(f"k.{quote(k)} AS {quote('__key_' + k)}" for k in keys)
    had = f"o.{quote(keys[0])} IS NOT NULL AS __had"
    old_cols = ", ".join(f"o.{quote(c)}" for c in cols)
    src = (
        f"SELECT {key_cols}, {had}, {old_cols} FROM {keys_table} k LEFT JOIN "
        f"(SELECT * FROM {table} VERSION AS OF {snapshot}) o ON {on_old}"
    )
    on = " AND ".join(f"t.{quote(k)} = s.{quote('__key_' + k)}" for k in keys)
    sets = ", ".join(f"{quote(c)} = s.{quote(c)}" for c in cols)
    listed = ", ".join(quote(c) for c in cols)
    values = ", ".join(f"s.{quote(c)}" for c in cols)
    engine.spark.sql(
        f"MERGE INTO {table} t USING ({src}) s ON {on} "
        f"WHEN MATCHED AND s.__had THEN UPDATE SET {sets} "
        "WHEN MATCHED THEN DELETE "
        f"WHEN NOT MATCHED AND s.__had THEN INSERT ({listed}) VALUES ({values})"
    )


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
