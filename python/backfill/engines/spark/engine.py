"""The Spark engine: model SQL runs as Spark SQL on Apache Iceberg tables.

Tables. Every model is an Iceberg table ``<catalog>.<schema>.<model>`` partitioned by its grain
on its event time (``hours``/``days``/``months``/``years``; a week or quarter by ``days``/
``months``, of which it is a union). Sources are tables of the same catalog
(``source("raw", "orders")`` is ``<catalog>.raw.orders``). The default catalog is an Iceberg
"hadoop" catalog in a folder of the project; any other (REST, Hive, JDBC) is a setting.

Writes. A task computes its SELECT and commits it in ONE Iceberg commit: ``replace`` overwrites
exactly its period (``writeTo(t).overwrite(<event_time in [start, end)>)``: a period whose new
result is empty ends up empty, unlike Spark's dynamic partition overwrite, which keeps the old
rows of partitions the new data does not touch); ``merge`` is a ``MERGE INTO`` on the unique key;
``full`` rewrites the table. A row outside the period makes the write job fail before the commit
(a ``raise_error`` filter in the same job: the SELECT runs once). Commit conflicts between
concurrent tasks are retried by Iceberg, then reported as transient.

Write-audit-publish with branches. A backfill ``bf_x`` writes into the branch ``audit_bf_x`` of
each table, created from main at the backfill's first write to that table. ``ref()`` inside the
backfill reads that branch, which holds the new rows for the backfilled periods and the published
rows elsewhere; readers of main never see it. Seen through the Engine interface, the area of a
model is its branch restricted to the area's periods (the rows the backfill wrote). Publish
(:mod:`.publish`) fast-forwards main to the branch, table by table.

One SparkSession per process (:mod:`.session`); runner threads are concurrent Spark jobs in a
FAIR scheduler pool. The folder ("hadoop") catalog serializes commits inside one JVM only: run one
runner process per folder catalog (with ``concurrency`` threads), or use a REST/Hive/JDBC catalog
for several. A model ``view`` is not supported: Iceberg's folder catalog keeps no views. A model
first built by an audit backfill gets an empty table in main (its branch needs a table).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import itertools
import logging
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from decimal import Context, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._extras import extra_required
from ..._secrets import mask_text
from ...errors import InvalidInputError, NotFoundError
from ...fingerprints import PartitionFingerprint
from ...model.files import EngineSettings
from ...versions import KeptModel, PublishedVersion, backup_schema
from ..base import (
    CHANGELOG_SCALE,
    VERSIONS_TABLE,
    Area,
    Capabilities,
    Column,
    ColumnKind,
    DeadLetters,
    Part,
    PublishModel,
    PublishRequest,
    TaskFailure,
    model_location,
    project_model,
)
from ..sql import (
    Rel,
    SqlEngine,
    Written,
    task_parts,
    version_of_row,
    version_order,
    writes_period,
)
from .jobs import SparkJobs, cancelled_text, interrupted
from .maintenance import maintain
from .publish import Moved, kept_of, publishing, restore, swap
from .session import (
    catalog_name,
    check_master,
    find_iceberg_jar,
    register_catalog,
    small_session,
    spark_session,
)
from .sql import SparkDialect, arrow_rows, kind_of, quote
from .tables import IcebergTables, utc_timestamps

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from ...model.project import Model, Project

#: Iceberg's read.split.target-size and read.split.open-file-cost defaults (see _few_rows_of)
_SPLIT_DEFAULT = 128 << 20
_OPEN_FILE_COST = 4 << 20

log = logging.getLogger(__name__)

__all__ = ["SparkEngine"]

_EXACT = Context(prec=80)
_OUTSIDE = "backfill: a row is outside the period of the task"
# Java exceptions that a retry of the same task can get past (a concurrent commit won).
_TRANSIENT = (
    "CommitFailedException",
    "CommitStateUnknownException",
    "ValidationException",
    "ConcurrentModification",
    "Connection refused",
    "SparkContext was shut down",
)


class SparkEngine(IcebergTables, SqlEngine):
    """Spark (``master``) on an Iceberg ``catalog``: a folder (a hadoop catalog, default
    ``.backfill/iceberg`` in the project) or catalog properties passed to Spark as they are
    (``{type: rest, uri: ...}``). Published models live in namespace ``schema``. ``conf`` is
    Spark configuration for the session (when this engine starts it). ``jars``: the Iceberg
    runtime jar (or its folder), default ``build/jars`` of the repository. ``stream_periods``:
    partitions per Arrow chunk the audit's diff pulls to the driver. ``held_rows``: the most
    rows (both versions' tables, by their snapshots' record counts) an audit reads whole in one
    query per model instead of a fingerprint aggregate (a shuffle: more than the rows cost,
    when they are few) and streams of the differing partitions."""

    name = "spark"
    capabilities = Capabilities(
        atomic_publish=False, landing=True, interrupt=True, shared_cores=True
    )
    audit_in_one_query = True  # a Spark job's fixed cost dwarfs a partition's scan

    def __init__(
        self,
        catalog: str | Path | Mapping[str, Any],
        *,
        master: str = "local[*]",
        schema: str = "main",
        conf: Mapping[str, Any] | None = None,
        jars: str | None = None,
        pool: str = "backfill",
        stream_periods: int = 8,
        held_rows: int = 200_000,
    ) -> None:
        super().__init__()
        if isinstance(catalog, Mapping):
            self.catalog_props = {str(k): str(v) for k, v in catalog.items()}
        else:
            self.catalog_props = {"type": "hadoop", "warehouse": str(Path(catalog).resolve())}
        self.catalog = catalog_name(repr(sorted(self.catalog_props.items())))
        self.master = master
        self.schema = schema
        self.conf = dict(conf or {})
        self.pool = pool
        self.stream_periods = max(1, int(stream_periods))
        self.held_rows = max(0, int(held_rows))
        # relation -> (table, branch, pinned snapshot or None) of the relations _source handed
        # out (see _rows_at_most)
        self._rel_refs: dict[str, tuple[str, str, int | None]] = {}
        # this thread's pinned snapshots, (table, branch) -> snapshot id (see pinned), and the
        # snapshot its last write committed (see _write_version)
        self._pins = threading.local()
        # Checked now, before any task is claimed: PySpark, the jar, and a reachable master.
        with extra_required("the Spark engine", "spark"):
            import pyspark  # noqa: F401
        self.jar = find_iceberg_jar(jars)
        check_master(master)
        self._spark: SparkSession | None = None
        self._small: SparkSession | None = None
        self._mutex = threading.Lock()
        self._locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._checked: set[str] = set()
        self._branches: set[tuple[str, str]] = set()
        self._table_types: dict[str, dict[str, str]] = {}
        self._snapshot_types: dict[tuple[str, int], dict[str, str]] = {}
        self._views = 0
        self._moved: list[Moved] = []
        # (snapshot id, the versions it holds) of backfill_versions: see published_versions
        self._versions: tuple[int, tuple[PublishedVersion, ...]] | None = None
        self._jobs = SparkJobs()
        self.spark_dialect = SparkDialect(self.catalog)
        self.dialect = self.spark_dialect

    @classmethod
    def table_source(cls, location: str, database: str, rel: tuple[str, str] | None) -> Any:
        """The table ``rel`` of the Iceberg folder catalog ``database``
        (``iceberg:///warehouse#schema.table``), read at one snapshot by the process's
        SparkSession (``local[*]`` with the Iceberg jar of :func:`.session.find_iceberg_jar`
        when none runs yet): ``backfill.diff_tables``."""
        from .pinned import folder_catalog, open_pinned

        if rel is None:
            raise InvalidInputError(f"{location}: expected iceberg:///warehouse#schema.table")
        if not Path(database).is_dir():
            raise InvalidInputError(f"{location}: no Iceberg warehouse folder {database}")
        with extra_required("Iceberg tables", "spark"):
            import pyspark  # noqa: F401
        return open_pinned(
            location,
            master="local[*]",
            jar=find_iceberg_jar(None),
            conf={},
            props=folder_catalog(database),
            rel=rel,
        )

    def _open_table(self, rel: Rel, location: str, ref: str = "main") -> Any:
        """The table ``rel`` of this engine's catalog, read at the snapshot of its branch
        ``ref`` in a session of its own (reading creates nothing, not even the engine's
        namespace)."""
        from .pinned import open_pinned

        return open_pinned(
            location,
            master=self.master,
            jar=self.jar,
            conf=self.conf,
            props=self.catalog_props,
            rel=rel,
            stream_periods=self.stream_periods,
            ref=ref,
        )

    def area_table(self, project: Project, model: str, area: Area) -> Any:
        """The model's Iceberg table at its backfill's audit branch (``main`` for a direct
        area), pinned to the branch's snapshot: an audit area has no location of its own, and
        any catalog (not only a folder) is read this way."""
        project_model(project, model)
        rel = self.published(project, model)
        if area.direct:
            return self._open_table(rel, f"{model} (published)")
        branch = self.branch(str(area.backfill_id))
        return self._open_table(rel, f"{model} (branch {branch})", ref=branch)

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> SparkEngine:
        """The engine ``engine: {type: spark, ...}`` of backfill.yml names."""
        opts = dict(settings.options)
        catalog = opts.pop("catalog", None) or settings.path
        return cls(catalog, schema=settings.schema, **opts)

    def __repr__(self) -> str:  # recorded in the ledger: catalog credentials are masked
        return mask_text(f"SparkEngine({self.catalog_props!r}, master={self.master!r})")

    @property
    def spark(self) -> SparkSession:
        """The process's SparkSession, with this engine's catalog registered."""
        with self._mutex:
            if self._spark is None:
                spark = spark_session(self.master, self.jar, self.conf)
                register_catalog(spark, self.catalog, self.catalog_props)
                spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self._ns()}")
                self._spark = spark
            return self._spark

    @property
    def small(self) -> SparkSession:
        """The session for the audit's small queries (:func:`.session.small_session`)."""
        spark = self.spark
        with self._mutex:
            if self._small is None:
                self._small = small_session(spark, self.catalog, self.catalog_props)
            return self._small

    # -- the core's hooks ------------------------------------------------------------------------
    @contextlib.contextmanager
    def connect(self) -> Iterator[_Statements]:
        """Nothing to hold: each statement goes to the session when it runs (a task whose write
        is Spark's own starts no session here). The block's Spark jobs carry a job tag of its
        own, through which :meth:`interrupt` cancels them (:mod:`.jobs`)."""
        with self._jobs.lent(self._context):
            yield _Statements(self)

    def _context(self) -> Any:
        """The SparkContext when the session runs (None: not started; never starts it)."""
        return None if self._spark is None else self._spark.sparkContext

    def interrupt(self) -> None:
        """Cancels the Spark jobs of every task running now (their running Spark tasks are
        interrupted); a task between two jobs fails at its next one. Each raises a transient
        TaskFailure saying it was interrupted, having committed nothing. No session: nothing
        runs."""
        # Spark's errors: a context stopped meanwhile has nothing left to cancel.
        count = self._jobs.interrupt(self._context(), self._warehouse_errors())
        if count:
            log.info("Spark engine: cancelled the jobs of %d running block(s) of work", count)

    def _job(self, description: str) -> SparkSession:
        spark = super()._job(description)
        self._jobs.attach(spark.sparkContext, description)
        return spark

    def _rows(self, cur: Any, sql: str) -> list[tuple[Any, ...]]:
        # This thread's jobs in the engine's pool, named for what the thread is doing (Spark's
        # UI and event log): a rollback's reads are not an audit's.
        self._job(getattr(self._pins, "phase", None) or "backfill: query")
        return arrow_rows(self.small, sql)

    @contextlib.contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """This thread's queries inside the block are Spark jobs described as ``label``."""
        before = getattr(self._pins, "phase", None)
        self._pins.phase = label
        try:
            yield
        finally:
            self._pins.phase = before

    def _columns(self, cur: Any, rel: Rel) -> list[Column] | None:
        table = self.dialect.qualified(rel)
        if not self.exists(table):
            return None
        return [Column(n, t, kind_of(t)) for n, t in self._types(table).items()]

    def _kind(self, cur: Any, rel: Rel) -> str | None:
        return "table" if self.exists(self.dialect.qualified(rel)) else None

    @contextlib.contextmanager
    def _arrow(self, sql: str) -> Iterator[Any]:
        small = self.small
        self._jobs.attach(small.sparkContext)
        yield small.sql(sql).toArrow()

    def _transaction(self, cur: Any) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(cur)  # one Iceberg commit a write (see _write)

    def _warehouse_errors(self) -> tuple[type[Exception], ...]:
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]
        from pyspark.errors import PySparkException

        # Spark's failures (a JVM exception captured by pyspark, or py4j's Py4JJavaError and
        # Py4JNetworkError) carry the Java exception as text; InvalidInputError and
        # NotFoundError (a ref() to no model) are a model our rendering refused.
        return (PySparkException, Py4JError, InvalidInputError, NotFoundError)

    def _failure(self, where: str, exc: Exception) -> tuple[TaskFailure, bool] | None:
        if not isinstance(exc, self._warehouse_errors()):
            return None
        if self._jobs.cancelled():  # whatever the job's error says: our interrupt ended it
            return interrupted(where, _first_line(exc)), False
        return _task_failure(where, exc), False

    def _ensure_schema(self, cur: Any, schema: str) -> None:
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self._ns(schema)}")

    def _stage_rows(self, cur: Any, rows: Any) -> str:
        return self._temp_view(self.spark.createDataFrame(utc_timestamps(rows)))

    def _unstage(self, cur: Any, staged: str) -> None:
        self.spark.catalog.dropTempView(staged)

    def _ref(self, project: Project, area: Area, cur: Any, name: str) -> str:
        """What a read of ``name`` sees in ``area``: the backfill's branch (new rows for the
        backfilled periods, published rows elsewhere) for a model it rebuilds."""
        table = self.table(name)
        if area.direct or name not in area.periods:
            return table
        branch = self.branch(str(area.backfill_id))
        if not self.has_branch(table, branch):
            return table  # nothing written yet: the published rows
        return self._on_branch(table, branch)

    # -- writing --------------------------------------------------------------------------------
    def _write(
        self,
        cur: Any,
        project: Project,
        m: Model,
        window: tuple[dt.datetime | None, dt.datetime | None],
        area: Area,
        rows: Any,
        dead_letters: DeadLetters | None,
    ) -> Written:
        where = model_location(project, m.name)
        if m.strategy == "view":
            raise TaskFailure(
                f"{where}: strategy view is not supported on Spark (Iceberg's "
                "folder catalog keeps no views); use strategy full",
                transient=False,
            )
        partitioned = writes_period(project, m, window)
        self._pins.written = None
        written, deleted, fp, parts = self._write_table_of(
            project, m, window, area, rows, partitioned
        )
        if dead_letters is not None and window[0] is not None and window[1] is not None:
            with self._locks[self.table(dead_letters.table)]:  # the first tasks create it
                self._dead_letters(cur, project, dead_letters, (window[0], window[1]))
        return written, deleted, fp, parts

    def _write_table_of(
        self,
        project: Project,
        m: Model,
        window: tuple[dt.datetime | None, dt.datetime | None],
        area: Area,
        rows: Any,
        partitioned: bool,
    ) -> Written:
        """Rows written and deleted, the fingerprint of the period and, when the task's period
        is calendar partitions of the model, of each (label -> fingerprint: the audit takes
        them instead of reading the area; empty when not computed)."""
        from pyspark.sql import functions as F

        start, end = window
        where = model_location(project, m.name)
        label = f"[{start:%Y-%m-%d %H:%M}, {end:%Y-%m-%d %H:%M})" if partitioned else "(all)"
        spark = self._job(f"backfill {area.backfill_id or 'direct'}: {m.name} {label}")
        if rows is None:
            df = spark.sql(self.render(project, m.name, start, end, area))
        else:
            df = spark.createDataFrame(utc_timestamps(rows))
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        et_kind = kind_of(types.get(m.event_time or "", ""))
        if m.event_time and m.grain and m.event_time not in types:
            raise TaskFailure(
                f"{where}: the SELECT has no column {m.event_time!r} (the model's "
                f"event_time); it returned {', '.join(types)}",
                transient=False,
            )
        table = self.table(m.name)
        cond = "TRUE"
        if partitioned:
            assert start is not None and end is not None and m.event_time
            cond = self.dialect.in_periods(m.event_time, [(start, end)], et_kind)
            # Checked inside the write job itself: the SELECT runs once, and a failing job
            # commits nothing. A projection of the event time, not a filter: Spark may evaluate
            # a filter before the SELECT's own WHERE, never a projection on top of it.
            df = df.withColumn(
                m.event_time,
                F.expr(
                    f"CASE WHEN coalesce({cond}, FALSE) THEN {quote(m.event_time)} "
                    f"ELSE raise_error('{_OUTSIDE}') END"
                ),
            )
        with self._locks[table]:
            if area.direct and not partitioned:  # a rebuild may change the schema
                return (*self._rebuild(m, df, table, types, et_kind), {})
            self._ensure_table(m, table, types, et_kind)
        old = self.table_types(table)
        if old != types:  # remembered types may be stale: the table decides
            old = self.table_types(table, fresh=True)
        _check_columns(where, types, old, area)
        target, ref = table, "main"
        if not area.direct:
            ref = self._ensure_branch(table, str(area.backfill_id))
            target = self._on_branch(table, ref)
        token = uuid.uuid4().hex
        parts = _calendar_parts(m, window) if partitioned else []
        observed = None
        if m.strategy != "merge" and not (m.strategy == "append" and partitioned) and types == old:
            # An overwrite leaves exactly the new rows in the period: their fingerprints are
            # taken during the write job itself (no second scan), with the table's own types.
            df, observed = self._observed(df, list(types), m.event_time, et_kind, parts, token)
        if m.strategy == "merge" and partitioned:
            with self._locks[table]:  # _result then reads the newest snapshot: this one
                self._merge_df(spark, m, df, target)
                return self._result(table, ref, "", cond, m.event_time, parts)
        else:
            writer = df.writeTo(target).option("snapshot-property.backfill.write", token)
            if m.strategy == "append" and partitioned:
                writer.append()  # the planner refuses append models unless allow_append
            else:
                writer.overwrite(F.expr(cond))
        if observed is not None:
            snap, _, deleted = self._commit_of(table, ref, token)
            self._pins.written = str(snap)
            got = observed.get
            fp = PartitionFingerprint.of(int(got["n"]), int(got["h"]))
            by_part = {
                label: PartitionFingerprint.of(int(got["ns"][i]), int(got["hs"][i]))
                for i, (label, _, _) in enumerate(parts)
            }
            return fp.rows, deleted, fp, by_part
        return self._result(table, ref, token, cond, m.event_time, parts)

    def _observed(
        self,
        df: DataFrame,
        names: list[str],
        event_time: str | None,
        et_kind: ColumnKind,
        parts: Sequence[Part],
        token: str,
    ) -> tuple[DataFrame, Any]:
        """``df`` observed by its write job: the row count and digest of all its rows (``n``,
        ``h``) and of each of ``parts`` (the arrays ``ns`` and ``hs``, by part): the rows' hash
        and partition are computed once a row, in columns dropped again before the write."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observed = Observation(f"backfill_{token}")
        h, p = f"__backfill_h_{token[:8]}", f"__backfill_p_{token[:8]}"
        df = df.withColumn(
            h, F.expr(f"CAST({self.spark_dialect.names_hash(names, '')} AS DECIMAL(38, 0))")
        )
        aggs = ["count(1) AS n", f"coalesce(sum({h}), 0) AS h"]
        if parts and event_time:
            whens = " ".join(
                f"WHEN {self.dialect.in_periods(event_time, [(s, e)], et_kind)} THEN {i}"
                for i, (_, s, e) in enumerate(parts)
            )
            df = df.withColumn(p, F.expr(f"CASE {whens} END"))
            # Two arrays (the counts and the digests by part), not two columns a part: each
            # column is a JVM call to parse it and one to name it, 0.3 s a task of 45 days
            # before its job starts.
            counts = ", ".join(f"count_if({p} = {i})" for i in range(len(parts)))
            sums = ", ".join(
                f"coalesce(sum(IF({p} = {i}, {h}, NULL)), 0)" for i in range(len(parts))
            )
            aggs += [f"array({counts}) AS ns", f"array({sums}) AS hs"]
        return df.observe(observed, *(F.expr(a) for a in aggs)).drop(h, p), observed

    def _rebuild(
        self,
        m: Model,
        df: DataFrame,
        table: str,
        types: dict[str, str],
        et_kind: ColumnKind,
    ) -> tuple[int, int, PartitionFingerprint]:
        """A direct full build: any schema, one atomic Iceberg commit."""
        old = self._rows_in(table) if self.exists(table) else 0
        self._replace_with(table, df, self._partitioned_by(m, et_kind), m.event_time)
        self._checked.discard(table)
        self._table_types.pop(table, None)
        cols = [Column(n, t, kind_of(t)) for n, t in types.items()]
        fp = self._fingerprint_where(self.small, table, cols)
        return fp.rows, old, fp

    def _merge_df(self, spark: SparkSession, m: Model, df: DataFrame, target: str) -> None:
        if not m.unique_key:
            raise InvalidInputError(f"model {m.name!r}: strategy merge needs a unique_key")
        # Computed first (a local checkpoint): Spark 4.1 cannot plan a MERGE whose source reads
        # another Iceberg table of the session's catalog ("No plan for TableReference").
        view = self._temp_view(df.localCheckpoint(eager=True))
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in m.unique_key)
        try:
            spark.sql(
                f"MERGE INTO {target} t USING {view} s ON {on} WHEN MATCHED THEN "
                "UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )
        finally:
            spark.catalog.dropTempView(view)

    def _result(
        self,
        table: str,
        ref: str,
        token: str,
        cond: str,
        event_time: str | None,
        parts: Sequence[Part],
    ) -> Written:
        """Rows written and deleted by the commit carrying ``token`` (the newest commit of
        ``ref`` for ``token=""``), and the fingerprints of the written period and of its
        ``parts`` as that commit left them (later commits of other tasks do not count)."""
        snap, _, deleted = self._commit_of(table, ref, token)
        if token:
            # An overwrite or append changes its period only; a MERGE (no token) may move a
            # key's row out of another task's period: its commit names no version (see
            # written_by), so an audit never takes the run's fingerprints as the branch's.
            self._pins.written = str(snap)
        rel = f"(SELECT * FROM {table} VERSION AS OF {snap} WHERE {cond})"
        types = self.table_types(table)
        cols = [Column(n, t, kind_of(t)) for n, t in types.items()]
        if not parts or not event_time:
            fp = self._fingerprint_where(self.small, rel, cols)
            return fp.rows, deleted, fp, {}
        by_part = self._fingerprint_parts(self.small, rel, cols, event_time, parts)
        fp = PartitionFingerprint.total(by_part.values())
        return fp.rows, deleted, fp, by_part

    # -- inspecting -----------------------------------------------------------------------------
    def _source(
        self, cur: Any, project: Project, model: str, area: Area, preview: bool
    ) -> tuple[str, list[Column]] | None:
        """The rows of ``model`` in ``area`` (its branch, restricted to the area's periods of a
        partitioned model) and its columns; None when it has no table (or branch) there."""
        m = project_model(project, model)
        table = self.table(model)
        if area.direct:
            if not self.exists(table):
                return None
            snap = self._pin(table, "main")
            if snap is None:
                self._rel_refs[table] = (table, "main", None)
                return table, self._columns(cur, self.published(project, model)) or []
            rel = self._at(table, snap)
            self._rel_refs[rel] = (table, "main", snap)
            return rel, [
                Column(n, t, kind_of(t)) for n, t in self.snapshot_types(table, snap).items()
            ]
        branch = self.branch(str(area.backfill_id))
        if not self.has_branch(table, branch):
            return None
        snap = self._pin(table, branch)
        if snap is None:
            rel = self._on_branch(table, branch)
            types = self._types(rel)
        else:
            rel, types = self._at(table, snap), self.snapshot_types(table, snap)
        cols = [Column(n, t, kind_of(t)) for n, t in types.items()]
        periods = area.periods.get(model)
        if periods and m.event_time and m.strategy in ("replace", "merge", "append"):
            kind = next((c.kind for c in cols if c.name == m.event_time), None)
            where = self.dialect.in_periods(m.event_time, periods, kind)
            rel = f"(SELECT * FROM {rel} WHERE {where})"
        self._rel_refs[rel] = (table, branch, snap)
        return rel, cols

    @staticmethod
    def _at(table: str, snapshot: int) -> str:
        return f"(SELECT * FROM {table} VERSION AS OF {snapshot})"

    def _pin(self, table: str, ref: str) -> int | None:
        pins: dict[tuple[str, str], int] = getattr(self._pins, "snapshots", {})
        return pins.get((table, ref))

    def _ref_of(self, area: Area) -> str:
        return "main" if area.direct else self.branch(str(area.backfill_id))

    def version(self, project: Project, model: str, area: Area) -> str | None:
        """The snapshot id the branch of ``area`` (``main`` for the published tables) of the
        model's table points at, from the table's metadata (no Spark job)."""
        table = self.table(model)
        if not self.exists(table):
            return None
        snap = self.snapshot_of(table, self._ref_of(area))
        return None if snap is None else str(snap)

    @contextlib.contextmanager
    def pinned(
        self, project: Project, model: str, areas: Sequence[Area]
    ) -> Iterator[list[str | None]]:
        """Reads of the model's table on each area's branch see the snapshot the branch points
        at when the block starts (``VERSION AS OF``): what the audit computes is of exactly
        those snapshots, whatever commits meanwhile."""
        table = self.table(model)
        before: dict[tuple[str, str], int] = getattr(self._pins, "snapshots", {})
        pins = dict(before)
        versions: list[str | None] = []
        refs = self.iceberg_table(table).refs() if self.exists(table) else None
        for area in areas:
            ref = None if refs is None else refs.get(self._ref_of(area))
            if ref is not None:
                pins[(table, self._ref_of(area))] = int(ref.snapshotId())
            versions.append(None if ref is None else str(ref.snapshotId()))
        self._pins.snapshots = pins
        try:
            with self.phase(f"backfill: audit of {model}"):
                yield versions
        finally:
            self._pins.snapshots = before

    def written_by(
        self, project: Project, model: str, area: Area, version: str, writes: Collection[str]
    ) -> bool:
        """Whether the snapshots from ``version`` back along its parents are the commits
        ``writes`` (each a task's overwrite of its own period; tasks' periods do not overlap)
        until every one of them is met: nothing else committed to the branch after the first
        of them (a commit of anyone else, or a task's attempt the ledger does not hold, in
        between: False). Iceberg's metadata only (no Spark job)."""
        left = set(writes)
        if area.direct or not left or not version.isdigit():
            return False
        table = self.table(model)
        if not self.exists(table):
            return False
        t = self.iceberg_table(table)
        snap = t.snapshot(int(version))
        while snap is not None and left:
            sid = str(snap.snapshotId())
            if sid not in left:
                return False
            left.discard(sid)
            parent = snap.parentId()
            snap = t.snapshot(parent) if parent is not None else None
        return not left

    def _write_version(self) -> str | None:
        """The snapshot this thread's last write committed (its fingerprints are of it)."""
        written: str | None = getattr(self._pins, "written", None)
        return written

    def _rows_at_most(self, cur: Any, rels: Sequence[str], limit: int) -> bool:
        """From the snapshots' summaries (Iceberg's metadata: no Spark job): the rows of the
        whole table at the snapshot each relation reads (pinned, or the head of its branch),
        an upper bound of its rows."""
        total = 0
        for rel in rels:
            found = self._rel_refs.get(rel)
            if found is None:
                return False
            t = self.iceberg_table(found[0])
            snap = found[2]
            if snap is None:
                ref = t.refs().get(found[1])
                if ref is None:
                    return False
                snap = ref.snapshotId()
            records = t.snapshot(snap).summary().get("total-records")
            if records is None:
                return False
            total += int(records)
            if total > limit:
                return False
        return True

    def _few_rows_of(self, rel: str, parts: int) -> str:
        """A pinned ``rel`` read of ``parts`` partitions in about as many Spark tasks as the
        session has cores. Iceberg plans a task per few files (a daily table of one row a
        day: 23 tasks for 90 files), and on few rows a task's own cost is most of the read:
        90 one-row files read in 0.25 s as 23 tasks, 0.16 s as one (median of 10, local[2]).
        The split size that makes about a task a core weighs each partition at Iceberg's
        open-file cost (4 MiB: a partition is at least a file, however small), never below
        Iceberg's default of 128 MiB (then a few partitions are one task)."""
        found = self._rel_refs.get(rel)
        if found is None or found[2] is None or parts <= 0:
            return rel
        table, snap = found[0], found[2]
        cores = max(1, int(self.spark.sparkContext.defaultParallelism))
        split = max(_SPLIT_DEFAULT, -(-parts * _OPEN_FILE_COST // cores))
        pinned = self._at(table, snap)
        few = f"(SELECT * FROM {table} VERSION AS OF {snap} WITH ('split-size' = '{split}'))"
        return rel.replace(pinned, few)

    def _label(self, what: str) -> None:
        self._job(what)

    def _missing(self, project: Project, model: str, area: Area) -> NotFoundError:
        where = "the published tables" if area.direct else "the area"
        return NotFoundError(f"{model} has no table in {where} ({self.table(model)})")

    def _arrow_schema(self, select: str) -> Any:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(self.small.sql(f"{select} LIMIT 0").schema)  # planned, not run

    # -- publishing -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _publishing(self, cur: Any, project: Project, request: PublishRequest) -> Iterator[None]:
        """Iceberg commits one table at a time: no transaction holds a publish together, a
        failed one sets the tables it moved back (:func:`.publish.publishing`)."""
        with publishing(self, request) as moved:
            self._moved = moved  # one publish at a time in this process: publishing's lock
            yield

    def _swap(
        self,
        cur: Any,
        project: Project,
        request: PublishRequest,
        pm: PublishModel,
        view_sql: str | None = None,
        stale: Sequence[str] = (),
    ) -> KeptModel:
        """Moves main to the backfill's branch (a rollback: back to the rows of the snapshot the
        publication taken back kept); what it replaced stays readable by time travel: the
        snapshot main had before is what is kept."""
        rel = self.published(project, pm.model)
        backup = None if request.publication_id is None else backup_schema(request.publication_id)
        if pm.restore is not None:
            assert request.restores is not None
            kept = restore(self, project, pm, self._moved, request.restores, backup)
        else:
            branch = self.branch(request.backfill_id)
            before = swap(self, project, pm, branch, self._moved, backup)
            kept = kept_of(project, pm, before, stale)
        if not kept.existed and kept.strategy == "full" and pm.restore is not None:
            return kept  # put back to "absent": nothing to fingerprint
        after = {k: fp for k, fp in pm.new_fingerprints.items() if k not in kept.unchanged}
        return self._kept_after(cur, project, pm, rel, kept, after)

    def maintain(
        self, project: Project, keep: Mapping[str, Sequence[int]], older_than: dt.datetime
    ) -> list[str]:
        return maintain(self, project, keep, older_than)

    # -- the record of publications ------------------------------------------------------------
    def published_versions(self, project: Project) -> list[PublishedVersion]:
        """Read once per snapshot of ``backfill_versions`` (the query is a Spark job, 0.3 s of
        every publish and rollback, which reconcile with it first): a snapshot's rows never
        change, so the read is pinned to the snapshot it is kept under, and this engine's own
        appends extend what it holds (:meth:`_record_version`)."""
        table = self.dialect.qualified((self.schema, VERSIONS_TABLE))
        if not self.exists(table):
            return []
        snap = self.snapshot_of(table)
        if snap is None:  # created, nothing recorded yet
            return []
        held = self._versions
        if held is not None and held[0] == snap:
            return list(held[1])
        with self.phase("backfill: the record of publications"):
            rows = self._rows(None, self._versions_query(f"{table} VERSION AS OF {snap}"))
        found = tuple(version_of_row(r) for r in rows)
        self._versions = (snap, found)
        return list(found)

    def _record_version(
        self, cur: Any, request: PublishRequest, kept: Sequence[KeptModel]
    ) -> PublishedVersion:
        table = self.dialect.qualified((self.schema, VERSIONS_TABLE))
        before = self.snapshot_of(table) if self.exists(table) else None
        version = super()._record_version(cur, request, kept)
        held = self._versions
        if held is None or before is None or held[0] != before:
            return version
        t = self.iceberg_table(table)
        head = t.refs().get("main")
        parent = None if head is None else t.snapshot(head.snapshotId()).parentId()
        # The head's parent is the snapshot read: the head is this append (a commit by anyone
        # else since would sit between them). Otherwise the next read queries.
        if parent is not None and int(parent) == before:
            both = sorted((*held[1], version), key=version_order)
            self._versions = (int(head.snapshotId()), tuple(both))
        return version

    def backup_rows(self, publication_id: str) -> int | None:
        """None: what a publication replaced stays in the tables' snapshots (the rows the audit
        counted are in its record), nothing is kept apart."""
        return None

    def drop_backup(self, publication_id: str) -> None:
        """Drops a merge's kept keys (the rows stay in the tables' snapshots until they
        expire)."""
        ns = self._ns(backup_schema(publication_id))
        spark = self._job(f"backfill: drop backup {publication_id}")
        if not spark.catalog.databaseExists(ns.replace("`", "")):
            return
        for row in arrow_rows(spark, f"SHOW TABLES IN {ns}"):
            spark.sql(f"DROP TABLE IF EXISTS {ns}.{quote(str(row[1]))} PURGE")
        spark.sql(f"DROP NAMESPACE IF EXISTS {ns}")

    def _insert_rows(self, cur: Any, table: str, names: Sequence[str], rows: Sequence[Any]) -> None:
        # As Arrow: a DataFrame of Python rows is pickled through a Python worker process (a
        # Spark job: 0.3 s a publish record, 1.5 s for the first, which starts the worker);
        # an Arrow table is a local relation the driver reads directly (0.03 s). The table's
        # own types, in Arrow as PySpark maps them: an old changelog's measure values stay
        # doubles, written as floats.
        import pyarrow as pa  # type: ignore[import-untyped]
        from pyspark.sql.pandas.types import to_arrow_schema

        listed = ", ".join(quote(n) for n in names)
        schema = self.spark.sql(f"SELECT {listed} FROM {table} LIMIT 0").schema
        arrow = to_arrow_schema(schema)
        columns = [
            pa.array([_value(r[i], f.dataType.simpleString()) for r in rows], type=a.type)
            for i, (f, a) in enumerate(zip(schema.fields, arrow, strict=True))
        ]
        batch = pa.Table.from_arrays(columns, schema=arrow)
        self.spark.createDataFrame(batch, schema).writeTo(table).append()


class _Statements:
    """The core's cursor on Spark: a statement (DDL, DML) runs as Spark SQL in the engine's
    session, each its own Iceberg commit; queries go through the engine's ``_rows``."""

    def __init__(self, engine: SparkEngine) -> None:
        self._engine = engine

    def execute(self, sql: str) -> None:
        spark = self._engine.spark
        self._engine._jobs.attach(spark.sparkContext)
        spark.sql(sql)


def _value(value: Any, spark_type: str) -> Any:
    """``value`` as a Spark row of ``spark_type`` takes it (a decimal rounded to its scale)."""
    if value is None:
        return None
    if spark_type == "bigint":
        return int(value)
    if spark_type == "double":
        return float(value)
    if spark_type.startswith("decimal"):
        return Decimal(value).quantize(Decimal(1).scaleb(-CHANGELOG_SCALE), context=_EXACT)
    if spark_type == "string":
        return str(value)
    return value


def _check_columns(where: str, new: Mapping[str, str], old: Mapping[str, str], area: Area) -> None:
    if set(new) != set(old):
        raise TaskFailure(
            f"{where}: the SELECT's columns ({', '.join(new)}) differ from the table's "
            f"({', '.join(old)}){'' if area.direct else ' (its audit branch)'}; a partition "
            "task cannot change the schema: rebuild the model (strategy full) directly",
            transient=False,
        )


def _task_failure(where: str, exc: Exception) -> TaskFailure:
    from pyspark.errors import AnalysisException

    text = str(exc)
    if f"[USER_RAISED_EXCEPTION] {_OUTSIDE}" in text:  # not the plan's text of another error
        return TaskFailure(
            f"{where}: the SELECT returned row(s) with the event_time outside the "
            "task's period (or NULL); a task writes exactly its period: filter "
            "the inputs with {{ start }} and {{ end }}",
            transient=False,
        )
    first = _first_line(exc)
    if cancelled_text(text):  # cancelled by hand (Spark's UI) or by another program
        return interrupted(where, first, outside=True)
    if any(t in text for t in _TRANSIENT):
        return TaskFailure(f"{where}: {first}", transient=True)
    if isinstance(exc, (AnalysisException, InvalidInputError, NotFoundError)):
        return TaskFailure(f"{where}: SQL error: {first}", transient=False)
    return TaskFailure(f"{where}: {type(exc).__name__}: {first}", transient=True)


def _first_line(exc: Exception) -> str:
    """The first line of a Spark error: the Java exception's (py4j's own first line names only
    the call, ``An error occurred while calling o173.overwrite.``)."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    if not lines or not lines[0]:
        return type(exc).__name__
    if lines[0].startswith("An error occurred while calling") and len(lines) > 1:
        return lines[1].removeprefix(": ") or lines[0]
    return lines[0]


#: the most calendar partitions a write fingerprints one by one (two aggregates each in the
#: write job's observation); a task over more records only its period's (the audit then scans)
_OBSERVED_PARTS = 62


def _calendar_parts(m: Model, window: tuple[dt.datetime | None, dt.datetime | None]) -> list[Part]:
    """The calendar partitions of a task's period when they tile it (and are few enough to
    observe one by one); else none."""
    start, end = window
    if start is None or end is None:
        return []
    parts = task_parts(m, start, end)
    tiles = (
        bool(parts)
        and parts[0][1] == start
        and parts[-1][2] == end
        and all(a[2] == b[1] for a, b in itertools.pairwise(parts))
    )
    return parts if tiles and len(parts) <= _OBSERVED_PARTS else []
