"""An Iceberg table of a Spark catalog read at one snapshot, as a
:class:`~..table_source.TableSource` (``backfill.diff_tables``).

When it opens, the table's current snapshot (of ``main``) is looked up once through the Java
Iceberg API, and every query of the diff reads ``VERSION AS OF`` that id: a commit landing
while the fingerprints are computed or the differing partitions streamed is not seen, and the
result's ``snapshots`` names the id. The queries run in a session of the process's one
SparkContext with adaptive execution off (:func:`.session.small_session`: the fingerprint
aggregate is one query, the streamed rows a query per few partitions) and its own uncached
instance of the catalog, in UTC (naive timestamps are read as UTC wall time, as the canonical
encoding wants).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InvalidInputError, NotFoundError
from ..base import Column
from ..table_source import TableSource
from .session import catalog_name, register_catalog, small_session, spark_session
from .sql import SparkDialect, kind_of

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["PinnedIcebergTable", "folder_catalog", "reader_session"]

#: differing partitions streamed per Spark query when the engine's settings say nothing
STREAM_PERIODS = 8


def folder_catalog(folder: str) -> dict[str, str]:
    """The catalog properties of an Iceberg folder ("hadoop") catalog, as the engine sets them
    for ``catalog: <folder>``."""
    return {"type": "hadoop", "warehouse": str(Path(folder).resolve())}


def reader_session(
    master: str, jar: Path, conf: Mapping[str, Any], catalog: str, props: Mapping[str, str]
) -> SparkSession:
    """A session for reading the catalog ``props`` (registered as ``catalog``) in the process's
    SparkSession (started with ``master``, ``jar`` and ``conf`` when there is none). Reading
    creates nothing: unlike the engine's session, no namespace is made."""
    spark = spark_session(master, jar, conf)
    register_catalog(spark, catalog, props)
    session = small_session(spark, catalog, props)
    # ANSI (Spark 4's default, whatever the cluster says): a measure's exact sum that leaves
    # its type fails the query instead of wrapping around.
    session.conf.set("spark.sql.ansi.enabled", "true")
    return session


class PinnedIcebergTable(TableSource):
    """The Iceberg table ``rel`` (schema, name) of the catalog ``catalog`` registered in
    ``session``, read at the snapshot the branch ``ref`` (``main``, or a backfill's audit
    branch) points to when it opens."""

    def __init__(
        self,
        location: str,
        session: SparkSession,
        catalog: str,
        rel: tuple[str, str],
        stream_periods: int = STREAM_PERIODS,
        ref: str = "main",
    ) -> None:
        self.location = location
        self.dialect = SparkDialect(catalog)
        self.stream_periods = max(1, int(stream_periods))
        self._spark = session
        table = self.dialect.qualified(rel)
        if not session.catalog.tableExists(table.replace("`", "")):
            raise NotFoundError(f"{location}: no such table {rel[0]}.{rel[1]}")
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]

        jvm: Any = session._jvm
        try:
            iceberg = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
                session._jsparkSession, table.replace("`", "")
            )
        except Py4JError as exc:  # it carries the Java exception (no such class: not Iceberg)
            raise InvalidInputError(
                f"{location}: not an Iceberg table ({_first_line(exc)})"
            ) from None
        iceberg.refresh()
        if ref == "main":
            current = iceberg.currentSnapshot()
        else:
            branch = iceberg.refs().get(ref)
            if branch is None or not bool(branch.isBranch()):
                raise NotFoundError(f"{location}: table {rel[0]}.{rel[1]} has no branch {ref}")
            current = iceberg.snapshot(branch.snapshotId())
        #: the snapshot id every query reads (None: a table without any commit, hence no rows)
        self.snapshot_id: int | None = None if current is None else int(current.snapshotId())
        if self.snapshot_id is None:
            # VERSION AS OF needs a snapshot; a table without one has no rows to pin.
            self.relation = f"(SELECT * FROM {table} WHERE FALSE)"
            self.snapshot = "Iceberg table without snapshots (empty)"
        else:
            self.relation = f"(SELECT * FROM {table} VERSION AS OF {self.snapshot_id})"
            self.snapshot = f"Iceberg snapshot {self.snapshot_id} ({ref}), read by every query"
        schema = self._query(f"SELECT * FROM {self.relation} t LIMIT 0").schema
        self.columns = [
            Column(f.name, f.dataType.simpleString(), kind_of(f.dataType.simpleString()))
            for f in schema.fields
        ]

    def _query(self, sql: str) -> Any:
        """The DataFrame of ``sql`` (planned, not run); a query Spark refuses (a bad ``where``)
        raises InvalidInputError naming the location."""
        from pyspark.errors import PySparkException

        try:
            return self._spark.sql(sql)
        except PySparkException as exc:
            raise InvalidInputError(f"{self.location}: {_first_line(exc)}") from None

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        # Through Arrow, as the engine reads its rows: timestamps come back as aware UTC
        # datetimes whatever this process's local time zone is.
        table = self.arrow(sql)
        return list(zip(*(c.to_pylist() for c in table.columns), strict=True))

    def arrow(self, sql: str) -> Any:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        df = self._query(sql)
        try:
            return df.toArrow()
        except (PySparkException, Py4JError) as exc:  # a failure while the job runs
            raise InvalidInputError(f"{self.location}: {_first_line(exc)}") from None

    def close(self) -> None:
        """Nothing to release: the session is the process's, shared with the engine."""


def open_pinned(
    location: str,
    *,
    master: str,
    jar: Path,
    conf: Mapping[str, Any],
    props: Mapping[str, str],
    rel: tuple[str, str],
    stream_periods: int | None = None,
    ref: str = "main",
) -> PinnedIcebergTable:
    """The table ``rel`` of the Iceberg catalog ``props`` (registered under the name the engine
    gives it), read at the snapshot of its branch ``ref``; ``stream_periods`` differing
    partitions a query (None: :data:`STREAM_PERIODS`)."""
    catalog = catalog_name(repr(sorted(props.items())))
    session = reader_session(master, jar, conf, catalog, props)
    return PinnedIcebergTable(
        location, session, catalog, rel, stream_periods or STREAM_PERIODS, ref
    )


def _first_line(exc: BaseException) -> str:
    # py4j's error says only which call failed ("An error occurred while calling
    # o228.getResult."); the Java exception it carries says why.
    java = getattr(exc, "java_exception", None)
    text = str(java if java is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
