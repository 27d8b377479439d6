"""Iceberg tables of the Spark engine: naming, metadata through the Java Iceberg API (refs,
snapshots, ancestry: no Spark job each), table and branch creation, dropping areas, loading data.
"""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..base import ColumnKind, TaskFailure
from .sql import arrow_rows, kind_of, partition_transform, quote, table_properties

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from ...model.project import Model

__all__ = ["LOAD_CHUNK_BYTES", "IcebergTables", "table_properties", "utc_timestamps"]

#: Arrow bytes handed to the JVM at once by :meth:`IcebergTables.load_table`: a chunk is held
#: several times over while Spark serializes it (64 MB ran a 1 GB driver out of heap beside
#: the suite's other Spark tests)
LOAD_CHUNK_BYTES = 16 * 1024 * 1024
#: Iceberg's table property choosing a writer that keeps a file open per partition it meets
_FANOUT = "write.spark.fanout.enabled"
#: the read splits of a load's staging table (on disk; see load_table)
_LOAD_SPLIT_BYTES = 16 << 20


class IcebergTables:
    """The Iceberg side of :class:`~.engine.SparkEngine` (which sets these attributes)."""

    catalog: str
    schema: str
    pool: str
    _mutex: threading.Lock
    _locks: dict[str, threading.Lock]
    _checked: set[str]
    _views: int
    # Per engine caches of what a task would otherwise ask Iceberg (a table load each) before
    # every write: (table, branch) pairs known to exist (branches are only dropped by
    # drop_area, which forgets them), and each table's column types (changed only by a
    # rebuild, which forgets them; a mismatch with a SELECT is re-checked against the table).
    _branches: set[tuple[str, str]]
    _table_types: dict[str, dict[str, str]]
    # The column types of a table read at a snapshot (VERSION AS OF): Iceberg reads a snapshot
    # with the schema it was written with, so they never change. An audit asks them of each
    # pinned relation 4 times (24 for the shop's three models), each a query's analysis
    # (5-30 ms).
    _snapshot_types: dict[tuple[str, int], dict[str, str]]

    @property
    def spark(self) -> SparkSession:
        raise NotImplementedError

    def _job(self, description: str) -> SparkSession:
        """The session, with this thread's next Spark jobs in the engine's FAIR pool."""
        spark = self.spark
        sc = spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", self.pool)
        sc.setJobDescription(description)
        return spark

    # -- naming ---------------------------------------------------------------------------------
    def _ns(self, schema: str | None = None) -> str:
        return f"{quote(self.catalog)}.{quote(schema or self.schema)}"

    def table(self, model: str, schema: str | None = None) -> str:
        """The quoted Iceberg table of a published model (or of a source, given ``schema``)."""
        return f"{self._ns(schema)}.{quote(model)}"

    @staticmethod
    def branch(backfill_id: str) -> str:
        """The branch a backfill (or scratch area) writes to."""
        return f"audit_{backfill_id}"

    def _on_branch(self, table: str, branch: str) -> str:
        return f"{table}.{quote('branch_' + branch)}"

    def exists(self, table: str) -> bool:
        return bool(self.spark.catalog.tableExists(table.replace("`", "")))

    def iceberg_table(self, table: str) -> Any:
        """The Java ``org.apache.iceberg.Table`` (refreshed): metadata questions (refs,
        snapshots) go to it directly instead of costing a Spark job each."""
        spark: Any = self.spark
        t = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, table.replace("`", "")
        )
        t.refresh()
        return t

    def has_branch(self, table: str, branch: str) -> bool:
        if (table, branch) in self._branches:
            return True
        if not self.exists(table):
            return False
        ref = self.iceberg_table(table).refs().get(branch)
        found = ref is not None and bool(ref.isBranch())
        if found:
            self._branches.add((table, branch))
        return found

    def snapshot_of(self, table: str, ref: str = "main") -> int | None:
        """The snapshot id ``ref`` (a branch) of ``table`` points at; None when it has none."""
        found = self.iceberg_table(table).refs().get(ref)
        return None if found is None else int(found.snapshotId())

    def is_ancestor(self, table: str, ancestor: int, snapshot: int) -> bool:
        """Whether ``ancestor`` is ``snapshot`` or one of its parents."""
        spark: Any = self.spark
        util = spark._jvm.org.apache.iceberg.util.SnapshotUtil
        return bool(util.isAncestorOf(self.iceberg_table(table), snapshot, ancestor))

    def _commit_of(self, table: str, ref: str, token: str) -> tuple[int, int, int]:
        """(snapshot id, added rows, deleted rows) of the commit carrying ``token``, found by
        walking back from the head of ``ref`` (concurrent tasks may have committed after)."""
        t = self.iceberg_table(table)
        head = t.refs().get(ref)
        snap = t.snapshot(head.snapshotId()) if head is not None else None
        while snap is not None:
            summary = snap.summary()
            if summary.get("backfill.write") == token or token == "":
                return (
                    int(snap.snapshotId()),
                    int(summary.get("added-records") or 0),
                    int(summary.get("deleted-records") or 0),
                )
            parent = snap.parentId()
            snap = t.snapshot(parent) if parent is not None else None
        raise TaskFailure(
            f"{table}: the commit of this task is not on {ref} (a concurrent "
            "publish or drop moved it)",
            transient=True,
        )

    def _types(self, sql_or_table: str) -> dict[str, str]:
        schema = self.spark.sql(f"SELECT * FROM {sql_or_table} LIMIT 0").schema
        return {f.name: f.dataType.simpleString() for f in schema.fields}

    def snapshot_types(self, table: str, snapshot: int) -> dict[str, str]:
        """The column types of ``table`` read at ``snapshot`` (``VERSION AS OF``), remembered
        per engine (see ``_snapshot_types``)."""
        key = (table, snapshot)
        found = self._snapshot_types.get(key)
        if found is None:
            found = self._types(f"(SELECT * FROM {table} VERSION AS OF {snapshot})")
            with self._mutex:
                self._snapshot_types[key] = found
        return found

    def table_types(self, table: str, *, fresh: bool = False) -> dict[str, str]:
        """The column types of ``table`` (main), remembered per engine; ``fresh`` asks again."""
        if fresh or table not in self._table_types:
            self._table_types[table] = self._types(table)
        return self._table_types[table]

    def _temp_view(self, df: DataFrame) -> str:
        with self._mutex:
            self._views += 1
            name = f"__backfill_new_{self._views}_{uuid.uuid4().hex[:6]}"
        df.createOrReplaceTempView(name)
        return name

    def _rows_in(self, table: str) -> int:
        return int(str(arrow_rows(self.spark, f"SELECT count(*) FROM {table}")[0][0]))

    def _partitioned_by(self, m: Model, et_kind: ColumnKind) -> str:
        transform = partition_transform(m.grain, m.event_time, et_kind)
        return f"PARTITIONED BY ({transform})" if transform else ""

    def _replace_with(
        self, table: str, df: DataFrame, partitioned_by: str, cluster_by: str | None = None
    ) -> None:
        """Replaces ``table`` (``PARTITIONED BY ...`` or "") with the rows of ``df``: CREATE OR
        REPLACE, one atomic Iceberg commit, any schema. ``cluster_by``: the partition source
        column of a partitioned table.

        A CREATE ... AS SELECT gets no write ordering from Iceberg, whose writer then keeps one
        open Parquet file (with its page buffers) per partition a Spark task meets: a raw table
        of 334 days died with ``OutOfMemoryError: Java heap space`` in a 1 GB driver. The rows
        are sorted by ``cluster_by`` within each Spark partition instead, and the staged table
        carries ``write.spark.fanout.enabled=false`` for this write only: Iceberg's clustered
        writer then holds one file at a time (a partition's rows are contiguous)."""
        props = table_properties()
        if partitioned_by and cluster_by:
            df = df.sortWithinPartitions(cluster_by)
            props = table_properties({_FANOUT: "false"})
        view = self._temp_view(df)
        try:
            self.spark.sql(
                f"CREATE OR REPLACE TABLE {table} USING iceberg {partitioned_by} "
                f"{props} AS SELECT * FROM {view}"
            )
            if partitioned_by and cluster_by:
                # Later writes get Iceberg's own ordering; the setting is this write's only.
                self.spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES ('{_FANOUT}')")
        finally:
            self.spark.catalog.dropTempView(view)

    def _ensure_table(
        self, m: Model, table: str, types: Mapping[str, str], et_kind: ColumnKind
    ) -> None:
        """Creates the model's (empty) table in main when missing; checks an existing one is
        partitioned as the model's grain says (once per table and process)."""
        if table in self._checked:
            return
        expected = partition_transform(m.grain, m.event_time, et_kind)
        if not self.exists(table):
            cols = ", ".join(f"{quote(c)} {t}" for c, t in types.items())
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {table} ({cols}) USING iceberg "
                f"{self._partitioned_by(m, et_kind)} {table_properties()}"
            )
            self._checked.add(table)
        if table in self._checked:
            return
        found = [
            str(r[1])
            for r in arrow_rows(self.spark, f"DESCRIBE TABLE {table}")
            if str(r[0]).startswith("Part ")
        ]
        want = [expected.replace("`", "")] if expected else []
        if [f.replace("`", "") for f in found] != want:
            raise TaskFailure(
                f"table {table} is partitioned by {found or 'nothing'}; model "
                f"{m.name!r} (grain {m.grain}, event_time {m.event_time}) expects "
                f"{want or 'no partitioning'}: recreate it, or fix its partition "
                "spec with ALTER TABLE ... ADD/DROP PARTITION FIELD",
                transient=False,
            )
        self._checked.add(table)

    def _ensure_branch(self, table: str, backfill_id: str) -> str:
        branch = self.branch(backfill_id)
        if (table, branch) in self._branches:
            return branch
        with self._locks[table]:
            self.spark.sql(f"ALTER TABLE {table} CREATE BRANCH IF NOT EXISTS {quote(branch)}")
            self._branches.add((table, branch))
        return branch

    def drop_area(self, backfill_id: str) -> None:
        """Drops the backfill's branch from every table that has it (any worker on any host
        may have made one, so every table of the schema is looked at). Through Iceberg's API,
        two tables at a time: a table's refs are in the metadata its load reads anyway, and
        the SQL statement's parse and analysis cost more than the commit (the shop's 7 tables:
        0.21 s by SQL one by one, 0.15 s so)."""
        branch = self.branch(backfill_id)
        self._branches = {tb for tb in self._branches if tb[1] != branch}
        spark = self._job(f"backfill: drop area {backfill_id}")
        tables = [
            self.table(str(row[1])) for row in arrow_rows(spark, f"SHOW TABLES IN {self._ns()}")
        ]

        def drop(table: str) -> None:
            with self._locks[table]:
                t = self.iceberg_table(table)
                ref = t.refs().get(branch)
                if ref is not None and bool(ref.isBranch()):
                    t.manageSnapshots().removeBranch(branch).commit()

        with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="drop-area") as pool:
            list(pool.map(drop, tables))  # re-raises the first failure

    def lock(self, table: str) -> threading.Lock:
        """The in-process lock serializing metadata changes of ``table``."""
        return self._locks[table]

    def load_table(
        self,
        name: str,
        data: Any,
        *,
        schema: str = "raw",
        event_time: str | None = None,
        grain: str | None = "day",
        chunk_bytes: int = LOAD_CHUNK_BYTES,
    ) -> int:
        """Replaces the table ``<schema>.<name>`` with ``data`` (an Arrow table, or a stream of
        record batches: anything with ``to_batches()`` or a ``pyarrow.RecordBatchReader``),
        partitioned by ``grain`` on ``event_time``; naive timestamps are read as UTC. Returns
        its rows.

        The rows go to the JVM ``chunk_bytes`` of Arrow data at a time, each chunk appended to a
        staging table, and the table is then replaced from the staging table in one commit:
        the driver holds one chunk, never the whole table (one ``createDataFrame`` of it is a
        local relation the driver's heap must hold: a 1 GB heap died loading 4,000 orders a day
        over 30 days), and readers see the old table or the new one."""
        import pyarrow as pa  # type: ignore[import-untyped]

        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes {chunk_bytes!r}: expected a positive number of bytes")
        reader = data if isinstance(data, pa.RecordBatchReader) else None
        batches = iter(reader) if reader is not None else iter(data.to_batches())
        arrow_schema = reader.schema if reader is not None else data.schema
        target = self.table(name, schema)
        staging = self.table(f"{name}__loading_{uuid.uuid4().hex[:8]}", schema)
        spark = self._job(f"backfill: load {schema}.{name}")
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self._ns(schema)}")
        rows = 0
        try:
            created = False
            for chunk in _chunks(batches, chunk_bytes):
                table = utc_timestamps(pa.Table.from_batches(chunk, schema=arrow_schema))
                df = spark.createDataFrame(table)
                if created:
                    df.writeTo(staging).append()
                else:
                    self._replace_with(staging, df, "")
                    created = True
                rows += table.num_rows
                # Py4J's proxies of JVM objects (a JavaObject and the JavaMembers it caches)
                # form reference cycles: the chunk's Dataset and the iterator over its Arrow
                # batches stay alive in the JVM until Python's cyclic collector runs, which
                # a loop allocating few Python objects rarely triggers. Measured on the 1.3 GB
                # test load: 5-8 chunks (~1.7M rows, ~300 MB) held in the driver's heap, and
                # the final sorted write ran out of its 1 GB in some runs. Collected here, the
                # driver holds one chunk.
                del df, table
                gc.collect()
            if not created:  # no rows: the table is replaced by an empty one of the schema
                empty = utc_timestamps(arrow_schema.empty_table())
                self._replace_with(staging, spark.createDataFrame(empty), "")
            # Iceberg combines files into read splits of 128 MB on disk; compressible rows (a
            # repeated payload) made one split many times that in memory, which the sort before
            # the final write holds: the 1.3 GB test load ran a 1 GB driver out of heap in some
            # runs. Smaller splits bound each task's rows.
            spark.sql(
                f"ALTER TABLE {staging} SET TBLPROPERTIES "
                f"('read.split.target-size' = '{_LOAD_SPLIT_BYTES}')"
            )
            loaded = spark.table(staging)
            kind = kind_of(
                {f.name: f.dataType.simpleString() for f in loaded.schema.fields}.get(
                    event_time or "", ""
                )
            )
            transform = partition_transform(grain, event_time, kind)
            by = f"PARTITIONED BY ({transform})" if transform else ""
            self._replace_with(target, loaded, by, event_time if transform else None)
        finally:
            spark.sql(f"DROP TABLE IF EXISTS {staging} PURGE")
        self._table_types.pop(target, None)
        return rows


def _chunks(batches: Iterator[Any], limit: int) -> Iterator[list[Any]]:
    """Record batches grouped into lists of about ``limit`` bytes (a batch larger than
    ``limit`` is sliced)."""
    out: list[Any] = []
    size = 0
    for batch in batches:
        n = batch.num_rows
        per_row = max(1, batch.nbytes // max(1, n))
        step = max(1, limit // per_row)
        for offset in range(0, n, step):
            piece = batch.slice(offset, step)
            if out and size + piece.nbytes > limit:
                yield out
                out, size = [], 0
            out.append(piece)
            size += piece.nbytes
    if out:
        yield out


def utc_timestamps(data: Any) -> Any:
    """The Arrow table ``data`` with its naive timestamps read as UTC instants (Spark's
    ``timestamp``)."""
    import pyarrow as pa

    fields = [
        pa.field(f.name, pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f
        for f in data.schema
    ]
    return data.cast(pa.schema(fields))
