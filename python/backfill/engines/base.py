"""The ``Engine`` interface: everything that touches a warehouse, for the whole
write-audit-publish cycle. Audit, gates, publish, ``check`` and ``estimate`` call only this.

An engine speaks its own dialect behind these calls:

* **write**: :meth:`Engine.run_task` builds one task's period of one model into an
  :class:`Area` -- the published tables (a direct build) or a backfill's audit area that readers of
  the published tables never see -- atomically and idempotently. Inside an audit area ``ref()`` to
  a model the backfill rebuilds reads the new rows for the backfilled periods and the published
  rows elsewhere. A scratch area (``check``, ``estimate``) is an audit area dropped right after.
* **inspect**: :meth:`~Engine.columns`, per-partition :meth:`~Engine.fingerprints` (row count and
  an order-independent digest, computed where the data lives), :meth:`~Engine.measure_sums`,
  :meth:`~Engine.is_unique` (a candidate key), and :meth:`~Engine.stream` (the rows of chosen
  periods as an Arrow stream, in batches, for the C++ diff).
* **publish**: :meth:`~Engine.publish` swaps a set of (model, periods) from the audit area into
  the published tables, re-checking inside the swap that the published partitions still have the
  fingerprints recorded at audit time, and writes the consumers' changelog rows in the same unit;
  :meth:`~Engine.drop_area` discards an area; :meth:`~Engine.changelog_rows` reads the changelog.

Every "which rows" argument is a model in an area, optionally restricted to periods. With
``preview=True`` the rows are those *publishing* the area would leave in the published table for
the area's periods: the area's own rows, except for a ``merge`` model, whose publish keeps the
published rows of the keys the backfill did not produce. The audit compares that with the
published version, so that it shows exactly what publish will change.

Guarantees an engine declares in :attr:`Engine.capabilities` (read by the core, never guessed
from the engine's class):

* ``atomic_publish=True``: every model of one publish is swapped in ONE transaction together with
  the changelog rows; a concurrent reader sees all old or all new (DuckDB, Postgres).
  ``atomic_publish=False``: models are swapped one at a time in dependency order; if one fails,
  the engine restores those already swapped before raising, so a publish still ends all-or-nothing,
  but a reader may see upstream models new and downstream models old while it runs (Iceberg
  commits one table at a time). Either way the changelog rows land only with a complete publish.
* ``embedded=True``: the engine runs in this process on this machine's cores, so estimates cap
  the useful concurrency at the core count.
* ``shared_cores=True``: one task's statement already spreads over every core the warehouse has
  (DuckDB's threads, a Spark job's executors), so tasks side by side share those cores instead of
  adding to them: ``partitions_per_run="auto"`` gives a model's period to as few tasks as
  :data:`~backfill.plan.costs.MAX_SHARED_TASK_SECONDS` allows instead of one per concurrent slot
  (more tasks would only add their fixed costs).
* ``multi_partition_tasks=True``: a task of several consecutive partitions is written in one
  transaction like a task of one, so ``partitions_per_run="auto"`` may group partitions.
* ``landing=True``: :meth:`Engine.land` writes rows handed over as Arrow (a Kafka source's
  landing model) with the same guarantees as :meth:`Engine.run_task`.
* ``table_partitions=True``: a model with ``table_partitions`` gets a declaratively partitioned
  table (one partition per period of that grain, made as periods appear), and publish
  exchanges its whole partitions instead of copying their rows (PostgreSQL); an engine without
  it fails such a model's tasks, naming the setting.

The conformance suite (``tests/python/conformance/``) defines what these words mean; every engine
passes it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import uuid
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from .._numbers import Number
from ..errors import BackfillError, ConflictError, InvalidInputError, NotFoundError
from ..fingerprints import PartitionFingerprint, TaskFingerprint
from ..versions import KeptModel, PublishedVersion

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Model, Project
    from .table_source import TableSource

__all__ = [
    "CHANGELOG_ADDED",
    "CHANGELOG_COLUMNS",
    "CHANGELOG_SCALE",
    "CHANGELOG_TABLE",
    "VERSIONS_COLUMNS",
    "VERSIONS_TABLE",
    "WHOLE",
    "Area",
    "Capabilities",
    "Column",
    "ColumnKind",
    "DeadLetters",
    "Engine",
    "Number",
    "Part",
    "Period",
    "PublishModel",
    "PublishRequest",
    "PublishResult",
    "StalePublishedError",
    "TaskFailure",
    "WriteResult",
    "model_location",
    "project_model",
]

Period = tuple[dt.datetime, dt.datetime]
#: (label, start, end) of one partition of a model
Part = tuple[str, dt.datetime, dt.datetime]
#: the one "partition" of an unpartitioned (full) model or of a whole table
WHOLE = "all"


class TaskFailure(BackfillError):
    """A task failed. ``transient`` failures (a lock, a write conflict) are worth retrying;
    others (a SQL error, rows outside the period) fail the same way every time."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class StalePublishedError(ConflictError):
    """Publish found published partitions whose fingerprints differ from those recorded at audit
    time (someone else published over the same periods): nothing was swapped."""

    def __init__(self, model: str, labels: Sequence[str]) -> None:
        shown = ", ".join(labels[:5]) + (", ..." if len(labels) > 5 else "")
        super().__init__(
            f"the published {model} changed since the audit in {len(labels)} partition(s) ({shown})"
        )
        self.model = model
        self.labels = list(labels)


@dataclass(frozen=True)
class Area:
    """Where a backfill writes and what it rebuilds.

    ``backfill_id=None`` writes straight into the published tables (an initial build). Otherwise
    writes go to the backfill's audit area, and ``ref()`` to a model in ``periods`` reads the new
    version for those periods and the published version elsewhere.
    """

    backfill_id: str | None
    periods: Mapping[str, Sequence[Period]] = field(default_factory=dict)

    @property
    def direct(self) -> bool:
        return self.backfill_id is None


PUBLISHED = Area(None)


@dataclass(frozen=True)
class WriteResult:
    rows_written: int
    rows_deleted: int
    fingerprint: PartitionFingerprint  # of the written period, computed in the engine
    seconds: float
    conflicts_retried: int = 0
    #: label -> fingerprint of each calendar partition of the task's period, when the engine
    #: computed them in the write: exactly what :meth:`Engine.fingerprints` of the area returns
    #: for them (the audit then need not scan the area). None: the audit scans.
    partitions: Mapping[str, PartitionFingerprint] | None = None
    #: the version of the area the write made (:meth:`Engine.version`; Iceberg: its commit's
    #: snapshot id), when the engine names versions
    version: str | None = None

    def task_fingerprint(self) -> TaskFingerprint:
        """The task's fingerprint as the ledger records it: the period's, with the partitions'
        when the engine computed them."""
        return TaskFingerprint(self.fingerprint, self.partitions, self.version)

    def recorded_fingerprint(self) -> str:
        """The stored text of :meth:`task_fingerprint` (see :func:`recorded_partitions`)."""
        return self.task_fingerprint().encode()


class ColumnKind(str, enum.Enum):
    """A column's type as the core reasons about it (keys, measures, time), whatever the
    engine calls it."""

    INTEGER = "integer"
    FLOAT = "float"
    DECIMAL = "decimal"
    STRING = "string"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"  # without time zone (engines read it as UTC)
    TIMESTAMP_TZ = "timestamp_tz"  # an instant
    LIST = "list"
    OTHER = "other"

    @property
    def numeric(self) -> bool:
        return self in (ColumnKind.INTEGER, ColumnKind.FLOAT, ColumnKind.DECIMAL)


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # the engine's own type name, e.g. "DECIMAL(18,2)"
    kind: ColumnKind


@dataclass(frozen=True)
class Capabilities:
    """What an engine guarantees (see the module doc)."""

    atomic_publish: bool
    embedded: bool = False
    landing: bool = False
    #: :meth:`Engine.interrupt` stops running tasks (else they run to their end when a runner
    #: stops; a process that exits then leaves them to the database to roll back)
    interrupt: bool = False
    #: one run_task over several consecutive partitions writes them in ONE transaction, so
    #: automatic batching may group them (dbt runs a range as one batch per partition: no)
    multi_partition_tasks: bool = True
    #: a task's statement uses every core of the warehouse: concurrent tasks share them, so
    #: automatic batching does not split a model's period to fill concurrent slots
    shared_cores: bool = False
    #: claimed tasks a runner hands the engine at once per unit of concurrency: an engine that
    #: runs waiting tasks together (dbt: consecutive batches in one invocation) gets up to this
    #: many, each still leased, run in its own thread and recorded on its own
    task_group: int = 1
    #: a model's ``table_partitions`` makes its table declaratively partitioned, and publish
    #: exchanges whole partitions (see :mod:`backfill.engines.sql.partitions`)
    table_partitions: bool = False


@dataclass(frozen=True)
class DeadLetters:
    """Records of ``topic`` a landing task could not decode (``rows``: Arrow, with the columns
    ``topic``, ``partition``, ``offset``, ``record_timestamp``, ``key``, ``value``, ``error``),
    for the published table ``table``. They replace the rows of that topic whose
    ``record_timestamp`` is in the task's period: running the task twice leaves the same rows."""

    table: str
    topic: str
    rows: Any


@dataclass(frozen=True)
class PublishModel:
    """One model of a publish: its backfilled partitions (empty: the whole table) and the
    published fingerprints recorded at audit time (label -> fingerprint)."""

    model: str
    parts: tuple[Part, ...]
    published_fingerprints: Mapping[str, PartitionFingerprint]
    #: the new rows' fingerprints (the audit's of the area): what the published partitions hold
    #: after the swap; empty: the engine fingerprints them after the swap (a merge, a rollback)
    new_fingerprints: Mapping[str, PartitionFingerprint] = field(default_factory=dict)
    #: a rollback: what the publication taken back kept of this model (its kept rows are the
    #: new rows; ``published_fingerprints`` are then that publication's ``after``)
    restore: KeptModel | None = None
    #: the versions the audit read (see :meth:`Engine.version`): ``"published"`` of the
    #: published relation (its ``published_fingerprints`` are of that version) and ``"area"``
    #: of the audit area; publish re-checks by scanning only a side whose version moved
    versions: Mapping[str, str] = field(default_factory=dict)

    def unchanged(self, stale: Collection[str] = ()) -> frozenset[str]:
        """Labels of the partitions whose new rows are the published ones: the audit found the
        same fingerprint on both sides, and the stale check found the published partition as
        the audit saw it (not in ``stale``). Publishing them changes nothing, so a publish keeps
        nothing of them and a rollback leaves them: a backfill that corrects 9 of 90 days keeps
        (and puts back) those 9, not 90."""
        return frozenset(
            label
            for label, _, _ in self.parts
            if label not in stale
            and label in self.new_fingerprints
            and self.published_fingerprints.get(label) == self.new_fingerprints[label]
        )


@dataclass(frozen=True)
class PublishRequest:
    """Everything :meth:`Engine.publish` swaps and records: models in dependency order and the
    changelog rows (tuples in :data:`CHANGELOG_COLUMNS` order)."""

    backfill_id: str
    area: Area
    models: tuple[PublishModel, ...]
    changelog: tuple[tuple[Any, ...], ...]
    #: the publication's id: what it replaces is kept under it (see :mod:`backfill.versions`);
    #: None keeps nothing (``publish: {keep: 0}``)
    publication_id: str | None = None
    #: a rollback: the publication whose kept version goes back (models in reverse dependency
    #: order, each with its ``restore``)
    restores: str | None = None
    #: publish over published partitions that changed since they were fingerprinted (a forced
    #: rollback) instead of refusing; :attr:`PublishResult.overwritten` lists them
    overwrite_stale: bool = False
    #: when it is published (ISO UTC) and until when what it replaces is kept: recorded with
    #: what it kept in the warehouse (``backfill_versions``) in the same step
    published_at: str = ""
    keep_until: str | None = None


@dataclass(frozen=True)
class PublishResult:
    """What :meth:`Engine.publish` did: what it kept of each model (in the request's order), and
    the partitions it published over although they had changed (``overwrite_stale`` only)."""

    kept: tuple[KeptModel, ...] = ()
    overwritten: Mapping[str, Sequence[str]] = field(default_factory=dict)


CHANGELOG_TABLE = "backfill_changelog"
#: what each publication kept (see backfill.versions.PublishedVersion), beside the changelog
VERSIONS_TABLE = "backfill_versions"
VERSIONS_COLUMNS = (
    "publication_id",
    "backfill_id",
    "rolls_back",
    "published_at",
    "keep_until",
    "models",
)
#: The consumers' changelog, one table in the published schema of every engine: (name, kind)
CHANGELOG_COLUMNS: tuple[tuple[str, ColumnKind], ...] = (
    ("publication_id", ColumnKind.STRING),
    ("backfill_id", ColumnKind.STRING),
    ("published_at", ColumnKind.TIMESTAMP_TZ),
    ("published_by", ColumnKind.STRING),
    ("reason", ColumnKind.STRING),
    ("note", ColumnKind.STRING),
    ("forced_reason", ColumnKind.STRING),
    ("model", ColumnKind.STRING),
    ("partition", ColumnKind.STRING),
    ("period_start", ColumnKind.TIMESTAMP_TZ),
    ("period_end", ColumnKind.TIMESTAMP_TZ),
    ("partitions", ColumnKind.INTEGER),
    ("rows_old", ColumnKind.INTEGER),
    ("rows_new", ColumnKind.INTEGER),
    ("rows_added", ColumnKind.INTEGER),
    ("rows_removed", ColumnKind.INTEGER),
    ("rows_changed", ColumnKind.INTEGER),
    ("measure", ColumnKind.STRING),
    ("value_old", ColumnKind.DECIMAL),
    ("value_new", ColumnKind.DECIMAL),
    ("delta", ColumnKind.DECIMAL),
    ("pct_delta", ColumnKind.FLOAT),
    ("value_type", ColumnKind.STRING),
)
#: The changelog's measure values are exact decimals: ``numeric`` where the engine has an
#: unbounded one (PostgreSQL), else DECIMAL(38, CHANGELOG_SCALE) (26 digits before the point, 12
#: after: any money total exactly). ``value_type`` says what the values were: ``integer``,
#: ``decimal(38,S)`` (S: their scale) or ``float`` (approximate).
CHANGELOG_SCALE = 12
#: changelog columns added after the table's first version (engines add them to old tables)
CHANGELOG_ADDED = ("value_type",)


class Engine(ABC):
    """A warehouse. Implementations must be safe to call from threads."""

    name: ClassVar[str] = "engine"
    capabilities: ClassVar[Capabilities] = Capabilities(atomic_publish=False)

    # -- writing --------------------------------------------------------------------------------
    @abstractmethod
    def run_task(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> WriteResult:
        """Builds ``model`` for [start, end) (None: the whole model) into ``area`` in one
        transaction: ``replace`` deletes and inserts the period, ``merge`` upserts on the unique
        key, ``full`` rebuilds, ``view`` (re)creates the view. Rows outside the period fail the
        task. Running it twice leaves the same table. Raises :class:`TaskFailure`."""

    def land(
        self,
        project: Project,
        model: str,
        start: dt.datetime,
        end: dt.datetime,
        area: Area,
        rows: Any,
        dead_letters: DeadLetters | None = None,
    ) -> WriteResult:
        """Replaces [start, end) of ``model`` in ``area`` with ``rows`` (an Arrow table, the
        model's columns) in one transaction, exactly as :meth:`run_task` writes a ``replace``
        task: rows outside the period fail it, running it twice leaves the same table. In the
        same transaction, ``dead_letters`` replace the period's rows of their table, which is
        always the published one (a record of what the log holds, not staged for an audit).
        Engines that declare ``capabilities.landing`` implement it."""
        raise TaskFailure(
            f"model {model!r} lands records from Kafka, which the {self.name} "
            "engine cannot write (it does not declare the landing capability); "
            "use an engine built on the SQL core (duckdb, postgres, spark) for landing models",
            transient=False,
        )

    @abstractmethod
    def render(
        self,
        project: Project,
        model: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        area: Area,
    ) -> str:
        """The model's SELECT for the period, with ref()/source()/this resolved for ``area``."""

    @abstractmethod
    def drop_area(self, backfill_id: str) -> None:
        """Drops a backfill's (or scratch) area and everything in it; a missing area is fine."""

    # -- inspecting -----------------------------------------------------------------------------
    @abstractmethod
    def columns(self, project: Project, model: str, area: Area) -> list[Column] | None:
        """The columns of ``model`` in ``area`` in table order; None when it has no relation
        there."""

    @abstractmethod
    def fingerprints(
        self,
        project: Project,
        model: str,
        area: Area,
        parts: Sequence[Part],
        *,
        preview: bool = False,
    ) -> dict[str, PartitionFingerprint]:
        """label -> fingerprint of ``model`` in ``area`` per (label, start, end) partition on the
        model's event_time; ``parts`` empty: the whole relation under :data:`WHOLE`. A missing
        relation or partition has 0 rows. Independent of row and column order."""

    @abstractmethod
    def measure_sums(
        self,
        project: Project,
        model: str,
        area: Area,
        measures: Sequence[str],
        periods: Sequence[Period] | None,
        *,
        preview: bool = False,
    ) -> dict[str, Number | None]:
        """measure -> sum over ``periods`` (None: the whole relation); None for no rows. Summed
        exactly in the engine: an ``int`` for integer columns, a ``Decimal`` with the column's
        scale for decimal columns (never a binary float), a ``float`` for float columns."""

    @abstractmethod
    def is_unique(
        self,
        project: Project,
        model: str,
        area: Area,
        columns: Sequence[str],
        periods: Sequence[Period] | None,
        *,
        preview: bool = False,
    ) -> bool:
        """Whether ``columns`` are non-null and distinct over ``periods`` (a candidate key)."""

    def audit_scope(
        self,
        project: Project,
        model: str,
        areas: Sequence[Area],
        parts: Sequence[Part],
        measures: Sequence[str],
        keys: Sequence[Sequence[str]],
        *,
        diff_area: Area | None = None,
    ) -> contextlib.AbstractContextManager[None]:
        """Announces the questions an audit of ``model`` is about to ask in each of ``areas``:
        :meth:`fingerprints` over ``parts``, :meth:`measure_sums` of (some of) ``measures``
        and :meth:`is_unique` of each of ``keys`` over the parts' periods. An engine where every
        question costs a job may answer them all in one pass when the block starts and serve
        exactly those questions from the answers until it ends (answers must equal what the
        methods return). ``diff_area``: the area whose rows the block will diff against the
        published ones (:meth:`stream_pair` over some of the parts): an engine may read both
        versions' rows of the parts in that one pass when they are few, answer the questions
        of both from them, and serve the pairs from them. Default: nothing batched, every
        question goes to the tables."""
        return contextlib.nullcontext()

    def version(self, project: Project, model: str, area: Area) -> str | None:
        """A name of the rows ``model`` holds in ``area`` now, read from the warehouse's
        metadata (no query): the same name later means the same rows (Iceberg: the table's
        snapshot id; a snapshot never changes, and every commit makes a new one). None: the
        engine names no versions, or the relation has none. Publish skips re-reading a side
        whose version is still the one the audit read (:meth:`pinned`)."""
        return None

    def pinned(
        self, project: Project, model: str, areas: Sequence[Area]
    ) -> contextlib.AbstractContextManager[list[str | None]]:
        """A block in which this thread's reads of ``model`` in each of ``areas`` see the one
        version of it named by the list it yields (in the order of ``areas``; None: not pinned,
        reads see the newest rows): an audit inside it computes what holds of exactly those
        versions, and records them. Default: nothing pinned."""
        return contextlib.nullcontext([None for _ in areas])

    def written_by(
        self, project: Project, model: str, area: Area, version: str, writes: Collection[str]
    ) -> bool:
        """Whether ``version`` of ``model`` in ``area`` (see :meth:`version`) holds, in the
        periods of the area, exactly what the writes named ``writes`` (the versions their tasks
        recorded: ``WriteResult.version``) left there: no other write came after the first of
        them. Then the fingerprints the tasks recorded are those of ``version``. False: not
        known (the default)."""
        return False

    @abstractmethod
    def stream(
        self,
        project: Project,
        model: str,
        area: Area,
        periods: Sequence[Period] | None,
        *,
        preview: bool = False,
        utc_column: str | None = None,
    ) -> contextlib.AbstractContextManager[Any]:
        """A context manager yielding the rows of ``model`` in ``area`` over ``periods`` (None:
        all) as an Arrow stream (``__arrow_c_stream__``), produced in batches so any size
        streams in bounded memory; valid until the block ends. ``utc_column`` adds the
        event_time as a UTC instant under that name (for partitioning naive timestamps as the
        engine's UTC period filters read them). Raises NotFoundError when the model has no
        relation in ``area``; ``periods=[]`` gives the relation's columns and no rows."""

    def area_table(self, project: Project, model: str, area: Area) -> TableSource:
        """``model``'s relation in ``area`` read in one snapshot, for ``backfill.diff_tables``
        (``backfill audit --against``). Call it with the engine closed (a DuckDB file takes one
        writer process: the diff opens it read-only). NotFoundError when the model has no
        relation in ``area``; InvalidInputError on an engine that cannot."""
        raise InvalidInputError(
            f"the {self.name} engine cannot open its audit areas for diff_tables, so it cannot "
            "audit against a table elsewhere"
        )

    @contextlib.contextmanager
    def stream_pair(
        self,
        project: Project,
        model: str,
        area: Area,
        periods: Sequence[Period],
        *,
        utc_column: str | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """The published rows of ``model`` and those of ``area`` (its preview) over ``periods``,
        as two Arrow streams (:meth:`stream` each): what an audit diffs. An engine whose every
        query has a high fixed cost may read both in one query."""
        with (
            self.stream(project, model, PUBLISHED, periods, utc_column=utc_column) as old,
            self.stream(project, model, area, periods, preview=True, utc_column=utc_column) as new,
        ):
            yield old, new

    def table_rows(self, schema: str, table: str) -> contextlib.AbstractContextManager[Any]:
        """A context manager yielding every row of the warehouse's table (or view)
        ``schema.table`` as an Arrow stream, in batches (``backfill diff schema.table``);
        InvalidInputError when there is no such table."""
        raise InvalidInputError(
            f"the {self.name} engine cannot read tables of its warehouse: diff .parquet or .csv "
            f"exports of {schema}.{table} instead"
        )

    def published_table(self, project: Project | None, name: str, location: str) -> TableSource:
        """The published table of ``project``'s model ``name`` (or the warehouse's table
        ``schema.table``) read in one snapshot, for ``backfill.diff_tables``; ``location`` names
        it in messages. InvalidInputError on an engine that cannot; NotFoundError when there is
        no such table."""
        raise InvalidInputError(
            f"{location}: the {self.name} engine cannot open its tables for diff_tables"
        )

    # -- publishing -----------------------------------------------------------------------------
    @abstractmethod
    def publish(self, project: Project, request: PublishRequest) -> PublishResult:
        """Swaps every model of ``request`` from the audit area into the published tables
        (replace: the periods; merge: upsert on the unique key; full: the table; view: re-created
        over the published tables) and appends the changelog rows, all-or-nothing as
        :attr:`capabilities` declares. Before swapping anything it compares each model's
        published fingerprints with those recorded at audit time and raises
        :class:`StalePublishedError` (nothing changed) when they differ. A request without
        models appends only its changelog rows (forward-only changes, delivery records).

        With a ``publication_id`` it keeps what it replaces, in the same step, so that the
        publication can be taken back (:mod:`backfill.versions`); a request that ``restores`` a
        publication publishes what that one kept (a rollback) and keeps in turn what it
        replaces."""

    def drop_backup(self, publication_id: str) -> None:  # noqa: B027 - optional
        """Drops what ``publication_id`` kept (its backup schema; nothing on an engine that
        keeps old versions as snapshots). Dropping a backup that is gone does nothing."""

    def published_versions(self, project: Project) -> list[PublishedVersion]:
        """What every publication with a ``publication_id`` recorded of what it kept, in the
        warehouse, oldest first (none on an engine that records nothing)."""
        return []

    def backup_rows(self, publication_id: str) -> int | None:
        """The rows ``publication_id`` keeps apart (None: the engine keeps old versions as
        snapshots, or nothing is kept)."""
        return None

    def partition_table(self, project: Project, model: str) -> int:
        """Makes the published table of ``model`` (which has ``table_partitions``) partitioned,
        its rows copied: an existing plain table is otherwise left alone. Returns the
        partitions made (0: partitioned already). An engine without ``table_partitions``
        refuses."""
        raise InvalidInputError(
            f"model {model!r}: the {self.name} engine has no partitioned tables "
            "(table_partitions needs postgres)"
        )

    def maintain(
        self, project: Project, keep: Mapping[str, Sequence[int]], older_than: dt.datetime
    ) -> list[str]:
        """Table maintenance after many small commits, for engines that keep old versions as
        snapshots (Iceberg): expires each published table's snapshots older than
        ``older_than`` except those ``keep`` names per model (a live rollback reads them), then
        compacts small files. Returns what it did, a line per table; others: nothing."""
        return []

    @abstractmethod
    def changelog_rows(
        self,
        project: Project,
        backfill_id: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """The changelog rows (in :data:`CHANGELOG_COLUMNS` order), newest publication first;
        only ``backfill_id``'s when given. No changelog yet: no rows."""

    def close(self) -> None:  # noqa: B027 - optional
        """Releases connections (engines may hold none between tasks)."""

    def expect(self, tasks: int) -> None:  # noqa: B027 - optional
        """A runner is about to hand over ``tasks`` claimed tasks at once, each calling
        :meth:`run_task` from its own thread. An engine that runs waiting tasks together
        (``capabilities.task_group`` > 1) waits for them rather than guessing from timing."""

    def interrupt(self) -> None:  # noqa: B027 - optional
        """Asks every task running now to stop at once (a runner aborting on a second Ctrl-C or
        after its grace period): each raises :class:`TaskFailure` and commits nothing. Safe to
        call from any thread, repeatedly. Engines that declare ``capabilities.interrupt``
        implement it; others let tasks run to their end."""


@contextlib.contextmanager
def scratch_area(
    engine: Engine,
    kind: str,
    periods: Mapping[str, Sequence[Period]],
) -> Iterator[Area]:
    """A scratch area (``check``, ``estimate``) that is dropped when the block ends, whatever
    happens in it."""
    area = Area(f"scratch_{kind}_{uuid.uuid4().hex[:8]}", periods)
    try:
        yield area
    finally:
        engine.drop_area(str(area.backfill_id))


def project_model(project: Project, model: str) -> Model:
    """The project's model ``model``; NotFoundError naming the project when it has none."""
    try:
        return project.models[model]
    except KeyError:
        raise NotFoundError(f"no model {model!r} in project {project.name!r}") from None


def model_location(project: Project, model: str) -> str:
    """Where a model is defined, for error messages: its SQL file when the project has one."""
    settings = project.settings
    if settings is not None and model in settings.files:
        return f"{settings.files[model]} (model {model!r})"
    return f"model {model!r}"
