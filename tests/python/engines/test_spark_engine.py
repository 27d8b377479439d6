"""The Spark engine beyond the conformance suite: set-up errors before anything runs (no Spark
needed), and on real Spark (the test session's one SparkSession) the empty-period trap of
partition overwrites and rows outside a task's period."""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path

import pytest

import backfill
from backfill.engines import PUBLISHED, TaskFailure

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from backfill.engines.spark import SparkEngine, SparkSetupError  # noqa: E402
from backfill.engines.spark.session import check_java  # noqa: E402
from backfill.model.files import ProjectError  # noqa: E402

UTC = dt.timezone.utc


def _day(d: int) -> dt.datetime:
    return dt.datetime(2026, 8, d, tzinfo=UTC)


def test_a_missing_jar_is_named_with_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(SparkSetupError, match=r"iceberg-spark-runtime-4\.1_2\.13.*make setup"):
        SparkEngine(tmp_path / "iceberg", jars=str(tmp_path / "no-such-folder"))


def test_an_unreachable_master_fails_before_any_task(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SparkSetupError, match=f"spark://127.0.0.1:{port} is unreachable"):
        SparkEngine(tmp_path / "iceberg", master=f"spark://127.0.0.1:{port}")


def test_missing_java_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkSetupError, match=r"Java 17.*openjdk-17-jre-headless"):
        check_java()


def _project(root: Path, models: dict[str, str], extra: str = "") -> backfill.Project:
    import spark_support

    spark_support.ensure_plugin()
    (root / "models").mkdir(parents=True)
    for name, sql in models.items():
        (root / "models" / f"{name}.sql").write_text(sql)
    (root / "backfill.yml").write_text(
        "name: t\n"
        + spark_support.engine_yaml()
        + extra
        + "sources:\n  raw:\n    events: {grain: day, event_time: ts}\n"
        "models:\n  defaults: {grain: day, begin: '2026-08-01', strategy: replace}\n"
    )
    return backfill.Project.load(root)


def test_engine_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match="unknown spark engine setting 'mastr'"):
        _project(tmp_path / "a", {"m": EVENTS}, "  mastr: local\n")
    assert _project(tmp_path / "c", {"m": EVENTS}, "  stream_periods: 4\n").settings is not None
    with pytest.raises(ProjectError, match="engine master 'mesos://x' must be"):
        _project(tmp_path / "d", {"m": EVENTS}, "  master: mesos://x\n")
    p = _project(tmp_path / "b", {"m": EVENTS})
    assert p.settings is not None and p.settings.engine.type == "spark"
    assert p.settings.engine.path.name == "iceberg"
    assert p.settings.engine.options["master"] == "local[2]"


EVENTS = """{{ config(event_time="ts") }}
select ts, v from {{ source("raw", "events") }} where ts >= {{ start }} and ts < {{ end }}
"""
UNFILTERED = """{{ config(event_time="ts") }}
select ts, v from {{ source("raw", "events") }}
"""


def _events(engine: SparkEngine, days: list[int]) -> None:
    data = pa.table(
        {
            "ts": pa.array(
                [_day(d).replace(tzinfo=None, hour=h) for d in days for h in (1, 2)],
                pa.timestamp("us"),
            ),
            "v": pa.array([d * 10 + h for d in days for h in (1, 2)], pa.int64()),
        }
    )
    engine.load_table("events", data, event_time="ts")


def test_an_empty_result_empties_its_period_and_rows_outside_fail(tmp_path: Path) -> None:
    p = _project(tmp_path / "p", {"events_clean": EVENTS, "events_bad": UNFILTERED})
    engine = backfill.engines.registry.engine_for(p)
    assert isinstance(engine, SparkEngine)
    _events(engine, [1, 2])
    for d in (1, 2):
        assert engine.run_task(p, "events_clean", _day(d), _day(d + 1), PUBLISHED).rows_written == 2
    _events(engine, [1])  # the source lost 2 Aug: rebuilding that day must leave it empty
    again = engine.run_task(p, "events_clean", _day(2), _day(3), PUBLISHED)
    assert (again.rows_written, again.rows_deleted, again.fingerprint.rows) == (0, 2, 0)
    fps = engine.fingerprints(
        p,
        "events_clean",
        PUBLISHED,
        [("2026-08-01", _day(1), _day(2)), ("2026-08-02", _day(2), _day(3))],
    )
    assert [fp.rows for fp in fps.values()] == [2, 0]
    # a SELECT without the period filter fails the task, permanently, and writes nothing
    with pytest.raises(TaskFailure, match="outside the task's period") as err:
        engine.run_task(p, "events_bad", _day(2), _day(3), PUBLISHED)
    assert not err.value.transient
    # a task twice: same snapshot contents
    first = engine.run_task(p, "events_clean", _day(1), _day(2), PUBLISHED)
    second = engine.run_task(p, "events_clean", _day(1), _day(2), PUBLISHED)
    assert first.fingerprint == second.fingerprint and second.rows_deleted == 2


def test_load_table_streams_a_table_larger_than_the_driver_heap(tmp_path: Path) -> None:
    """1.3 GB of Arrow rows (the session's driver heap is 1 GB, spark_support) stream from
    DuckDB into an Iceberg table a chunk at a time: all rows arrive, once, and the table is
    replaced in one commit (readers of the old table see it whole until then)."""
    import duckdb

    p = _project(tmp_path / "p", {"events_clean": EVENTS})
    engine = backfill.engines.registry.engine_for(p)
    assert isinstance(engine, SparkEngine)
    _events(engine, [1])  # an old table that the load replaces
    table = engine.table("events", "raw")
    history = f"SELECT count(*) FROM {table}.history"
    commits = engine.spark.sql(history).collect()[0][0]
    rows = 15_000_000
    con = duckdb.connect()
    try:
        stream = pa.RecordBatchReader.from_stream(
            con.sql(
                f"SELECT i AS v, TIMESTAMP '2026-08-01' + to_seconds(i % 86400) AS ts, "
                f"repeat(chr(97 + CAST(i % 26 AS INTEGER)), 64) AS payload FROM range({rows}) t(i)"
            )
        )
        assert rows * (8 + 8 + 64) > 2**30  # larger than the heap before any overhead
        assert engine.load_table("events", stream, event_time="ts") == rows
    finally:
        con.close()
    got = engine.spark.sql(
        f"SELECT count(*), count(DISTINCT v), sum(v), min(length(payload)) FROM {table}"
    ).collect()[0]
    assert tuple(got) == (rows, rows, rows * (rows - 1) // 2, 64)
    # one commit replaced it: readers saw the old table until the new one, whole
    assert engine.spark.sql(history).collect()[0][0] == commits + 1
    with pytest.raises(ValueError, match="chunk_bytes 0"):
        engine.load_table("events", stream, event_time="ts", chunk_bytes=0)
