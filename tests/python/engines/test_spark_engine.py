"""The Spark engine beyond the conformance suite: set-up errors before anything runs (no Spark
needed), and on real Spark (the test session's one SparkSession) the empty-period trap of
partition overwrites and rows outside a task's period."""

from __future__ import annotations

import datetime as dt
import socket
import sys
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


def _project(
    root: Path, models: dict[str, str], extra: str = "", sources: str = ""
) -> backfill.Project:
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
        + sources
        + "models:\n  defaults: {grain: day, begin: '2026-08-01', strategy: replace}\n"
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
    """1.3 GB of Arrow rows (the driver heap is 1 GB, spark_support) over 400 day partitions
    stream from DuckDB into an Iceberg table a chunk at a time: all rows arrive, once, and the
    table is replaced in one commit (readers of the old table see it whole until then).
    Hundreds of partitions: Iceberg's default writer for a CREATE ... AS SELECT keeps a file
    open per partition, which ran the heap out at 334 days of the shop's raw orders.

    In a process of its own: the claim is about a 1 GB heap, and the suite's shared session
    has run thousands of stages of other tests by then (in it, this load ran out of heap where
    a fresh JVM of the same size did not)."""
    import os
    import subprocess

    here = Path(__file__).resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(here.parents[1]), env.get("PYTHONPATH")) if p
    )
    done = subprocess.run(
        [sys.executable, str(here), "load-larger-than-heap", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1500,
        env=env,
    )
    # The JVM's own errors (an OutOfMemoryError, where) come long before the Python traceback
    # of the dead gateway that ends stderr: kept apart so a failure says which it was.
    jvm = [line for line in done.stderr.splitlines() if "Error" in line and "java" in line]
    assert done.returncode == 0, (
        done.stdout[-4000:] + "\n".join(jvm[:20]) + "\n" + done.stderr[-4000:]
    )
    assert "loaded 15000000 rows into 400 day partitions in one commit" in done.stdout


def _load_larger_than_the_heap(tmp_path: Path) -> None:
    """The body of the test above, run by this module as a script in a new process."""
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
                # consecutive rows in different days: the input is not clustered by day
                "SELECT i AS v, TIMESTAMP '2026-01-01' + to_days(CAST(i % 400 AS INTEGER)) "
                "+ to_seconds(i % 86400) AS ts, "
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
    days = engine.spark.sql(f"SELECT count(*) FROM {table}.partitions").collect()[0][0]
    assert days == 400
    # one commit replaced it: readers saw the old table until the new one, whole
    assert engine.spark.sql(history).collect()[0][0] == commits + 1
    with pytest.raises(ValueError, match="chunk_bytes 0"):
        engine.load_table("events", stream, event_time="ts", chunk_bytes=0)
    print(f"loaded {rows} rows into {days} day partitions in one commit")


# Each row of the period sleeps raw.knob's ``ms`` in the JVM (Thread.sleep, through reflect: a
# Spark task that only an interrupt ends early). The sleep depends on the row, so the optimizer
# cannot fold it into the plan; the knob is data, so the model's SQL is the same at plan and run.
SLOW = """{{ config(event_time="ts") }}
select e.ts, e.v from {{ source("raw", "events") }} e cross join {{ source("raw", "knob") }} k
where e.ts >= {{ start }} and e.ts < {{ end }}
  and length(coalesce(
    reflect('java.lang.Thread', 'sleep', cast(k.ms + e.v * 0 as bigint)), 'x')) > 0
"""


def _knob(engine: SparkEngine, ms: int) -> None:
    engine.load_table("knob", pa.table({"ms": pa.array([ms], pa.int64())}), grain=None)


def test_a_stop_cancels_running_spark_jobs_and_a_resume_completes_the_tasks(
    tmp_path: Path,
) -> None:
    """A stop (grace 0) while each task's Spark job sleeps: the runner's interrupt cancels the
    jobs within seconds (not the minute they would sleep), the attempts are recorded as
    interrupted, the tasks pending, nothing committed to the audit branch; the resume completes
    them with the source's rows, and publish puts exactly those in main."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from backfill.run.ledger import TaskState
    from backfill.run.stop import Stop

    p = _project(tmp_path / "p", {"events_slow": SLOW}, sources="    knob: {}\n")
    engine = backfill.engines.registry.engine_for(p)
    assert isinstance(engine, SparkEngine) and engine.capabilities.interrupt
    _events(engine, [1, 2])
    _knob(engine, 60_000)  # a minute a row
    plan = p.plan(
        "events_slow", "2026-08-01", "2026-08-03", as_of="2026-12-01", partitions_per_run=1
    )
    bf = p.backfill(plan, reason="stop test", engine=engine)
    tracker = engine.spark.sparkContext.statusTracker()
    stop = Stop()
    cancelled: list[float] = []

    def stop_when_both_jobs_run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(tracker.getActiveJobsIds()) < 2:
            time.sleep(0.05)
        cancelled.append(time.monotonic())
        stop.request()

    watcher = threading.Thread(target=stop_when_both_jobs_run)
    watcher.start()
    status = bf.run(2, stop=stop, grace=0, backoff=0.0)
    ended = time.monotonic()
    watcher.join()
    latency = ended - cancelled[0]
    assert latency < 10, f"the stop took {latency:.1f} s"  # the jobs would sleep 60 s more
    assert status.status == "interrupted", str(status)
    assert not tracker.getActiveJobsIds()  # cancelled, not left running in the JVM
    tasks = bf.ledger.tasks(bf.id)
    assert [t.status for t in tasks] == [TaskState.PENDING] * 2
    attempts = bf.attempts()
    assert len(attempts) == 2 and all(
        a["status"] == "failed"
        and a["error"].startswith("interrupted by a stop request")
        and "interrupted: its Spark jobs were cancelled by a stop (" in a["error"]
        and "[SPARK_JOB_CANCELLED]" in a["error"]
        for a in attempts
    ), attempts
    # nothing committed: no snapshot of the table is a task's write, the branch holds no row
    table = engine.table("events_slow")
    branch = engine.branch(bf.id)
    snapshots = list(engine.iceberg_table(table).snapshots())
    assert not [s for s in snapshots if s.summary().get("backfill.write") is not None]
    on_branch = f"{table}.`branch_{branch}`"
    assert engine.small.sql(f"SELECT count(*) FROM {on_branch}").collect()[0][0] == 0

    _knob(engine, 0)
    assert bf.run(2, backoff=0.0).ok
    # read through the engine's uncached session: the main one's catalog caches tables
    got = engine.small.sql(f"SELECT ts, v FROM {on_branch} ORDER BY ts").collect()
    expected = engine.small.sql(
        f"SELECT ts, v FROM {engine.table('events', 'raw')} ORDER BY ts"
    ).collect()
    assert [tuple(r) for r in got] == [tuple(r) for r in expected] and len(got) == 4
    assert bf.audit().passed
    bf.publish("stop test")
    published = engine.small.sql(f"SELECT ts, v FROM {table} ORDER BY ts").collect()
    assert [tuple(r) for r in published] == [tuple(r) for r in expected]

    # A job cancelled from outside (Spark's UI, cancelAllJobs) is an interruption too: a
    # transient failure that commits nothing, not the model's error.
    _knob(engine, 60_000)
    day = (_day(1), _day(2))  # its rows sleep again
    # jobs of the suite's other tests in the shared SparkContext are not this task's: wait for
    # one that started after it. The first may be one of the task's short jobs before its
    # sleeping write, ending before the cancel reaches it (then the write slept a minute a row
    # and the wait below timed out): cancel until the task has ended.
    before = set(tracker.getActiveJobsIds())
    with ThreadPoolExecutor(1) as pool:
        task = pool.submit(engine.run_task, p, "events_slow", *day, PUBLISHED)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not task.done():
            if set(tracker.getActiveJobsIds()) - before:
                engine.spark.sparkContext.cancelAllJobs()
            time.sleep(0.05)
        outside = "interrupted: its Spark job was cancelled outside backfill"
        with pytest.raises(TaskFailure, match=outside) as err:
            task.result(timeout=30)
    assert err.value.transient and "cancellation of all jobs" in str(err.value)


if __name__ == "__main__" and sys.argv[1:2] == ["load-larger-than-heap"]:
    _load_larger_than_the_heap(Path(sys.argv[2]))
