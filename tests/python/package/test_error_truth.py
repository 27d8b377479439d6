"""Errors tell the truth (issue 27): a handler meant for a broker, a database or bad input lets a
programming error (AttributeError, TypeError, ...) through as it is, and the executor never
retries one as transient; the failures the handlers are meant for still get their messages.

Real servers where a server is involved (a closed port for an unreachable broker or database,
the session's throwaway PostgreSQL); a bug is made by monkeypatching one client method to raise
AttributeError, as confluent-kafka 2.16's missing ``confluent_kafka.admin`` did."""

from __future__ import annotations

import datetime as dt
import socket
import time
from pathlib import Path
from typing import Any

import pytest

import backfill
from backfill.engines import Area, TaskFailure, WriteResult
from backfill.errors import PROGRAMMING_ERRORS, InvalidInputError
from backfill.run import TaskExecutor, TaskOutcome
from backfill.run.executor import is_transient
from backfill.run.ledger import Claim, LedgerError, SqliteLedger
from fake_engines import WriteOnlyEngine

WORKER = "thishost:0:me"
UTC = dt.timezone.utc


def _closed_port() -> int:
    """A port of 127.0.0.1 nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bug() -> AttributeError:
    return AttributeError("module 'confluent_kafka' has no attribute 'admin'")


# -- Kafka ----------------------------------------------------------------------------------------


def _kafka_settings(bootstrap: str, timeout: float = 2.0) -> Any:
    from backfill.integrations.kafka.settings import KafkaSettings

    return KafkaSettings(
        source="orders",
        bootstrap=bootstrap,
        topic="orders",
        format="json",
        event_time="ordered_at",
        key=None,
        lateness=dt.timedelta(0),
        columns={"order_id": "int", "ordered_at": "timestamp"},
        lands_in="raw_orders",
        timeout=timeout,
    )


@pytest.fixture
def kafka() -> Any:
    pytest.importorskip("confluent_kafka")
    import confluent_kafka.admin

    return confluent_kafka.admin


@pytest.mark.parametrize(
    "method",
    [
        "list_topics",
        "list_offsets",
        "describe_configs",
        "list_consumer_group_offsets",
        "describe_consumer_groups",
        "alter_consumer_group_offsets",
    ],
)
def test_a_bug_in_a_kafka_admin_wrapper_surfaces_as_itself(
    kafka: Any, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """Each wrapper that reports a broker's failure as BrokerError lets an AttributeError of the
    client through unchanged, at once (no retry until the deadline, no "did not answer")."""
    from backfill.integrations.kafka import client, groups
    from backfill.integrations.kafka.client import BrokerError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise _bug()

    monkeypatch.setattr(kafka.AdminClient, method, broken)
    cfg = _kafka_settings(f"127.0.0.1:{_closed_port()}", timeout=5.0)
    calls = {
        "list_topics": lambda: client.partitions(cfg),
        "list_offsets": lambda: client.list_offsets(cfg, "orders", [0, 1], "earliest"),
        "describe_configs": lambda: client.admin_call(cfg, "describe_configs", []),
        "list_consumer_group_offsets": lambda: groups.committed_offsets(cfg, "g", "orders", [0]),
        "describe_consumer_groups": lambda: groups.group_members(cfg, "g"),
        "alter_consumer_group_offsets": lambda: groups.apply_offsets(cfg, "g", "orders", {0: 5}),
    }
    if method == "alter_consumer_group_offsets":  # it asks for the group's members first
        monkeypatch.setattr(groups, "group_members", lambda cfg, group: ())
    began = time.monotonic()
    with pytest.raises(AttributeError, match="has no attribute 'admin'") as raised:
        calls[method]()
    assert not isinstance(raised.value, BrokerError)
    assert time.monotonic() - began < 2.0  # not retried until the 5 s deadline


def test_cleanup_policy_does_not_hide_a_bug_as_the_default(
    kafka: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backfill.integrations.kafka import client

    monkeypatch.setattr(
        kafka.AdminClient, "describe_configs", lambda *a, **k: (_ for _ in ()).throw(_bug())
    )
    with pytest.raises(AttributeError):
        client.cleanup_policy(_kafka_settings(f"127.0.0.1:{_closed_port()}"), "orders")


def test_an_unreachable_broker_is_still_a_broker_error(kafka: Any) -> None:
    """A closed port: librdkafka's KafkaException (or a future that never resolves) is the
    BrokerError that names the broker and the timeout, within the timeout."""
    from backfill.integrations.kafka import client
    from backfill.integrations.kafka.client import BrokerError

    bootstrap = f"127.0.0.1:{_closed_port()}"
    cfg = _kafka_settings(bootstrap, timeout=2.0)
    began = time.monotonic()
    with pytest.raises(
        BrokerError,
        match=f"Kafka broker {bootstrap} did not answer within 2s "
        r"\(source 'orders', topic 'orders'\)",
    ) as raised:
        client.partitions(cfg)
    assert raised.value.transient
    with pytest.raises(
        BrokerError,
        match=f"Kafka broker {bootstrap}: listing offsets "
        r"\(latest\) of topic 'orders' failed",
    ):
        client.list_offsets(cfg, "orders", [0], "latest")
    # An unreadable config is the documented default, not an error.
    assert client.cleanup_policy(cfg, "orders") == "delete"
    assert time.monotonic() - began < 30


class _Message:
    """A record as the consumer hands it out (only what the decoder reads)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def value(self) -> Any:
        return self._value

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 42


def test_avro_decoding_dead_letters_bad_bytes_but_not_a_bug() -> None:
    pytest.importorskip("fastavro")
    import dataclasses

    from backfill.integrations.kafka.landing import DecodeError, _decode_avro

    cfg = dataclasses.replace(
        _kafka_settings("127.0.0.1:1"),
        format="avro",
        avro_schema={
            "type": "record",
            "name": "Order",
            "fields": [{"name": "order_id", "type": "long"}, {"name": "note", "type": "string"}],
        },
    )
    for garbage in (b"", b"\x02", b"\x02\x06\xff\xfe\xfd", b"\xff" * 12):
        with pytest.raises(DecodeError, match="offset 42: not an Avro record"):
            _decode_avro(cfg, [_Message(garbage)])
    with pytest.raises(TypeError):  # a value of the wrong type is a bug of the caller
        _decode_avro(cfg, [_Message(12345)])


# -- the executor ---------------------------------------------------------------------------------


class _Raising(WriteOnlyEngine):
    """Raises ``error`` on every task; counts the calls."""

    name = "raising"

    def __init__(self, error: BaseException | None, seconds: float = 0.0) -> None:
        self.error, self.seconds, self.calls = error, seconds, 0

    def run_task(self, project: Any, model: str, start: Any, end: Any, area: Area) -> WriteResult:
        self.calls += 1
        time.sleep(self.seconds)
        if self.error is not None:
            raise self.error
        from backfill.engines import PartitionFingerprint

        return WriteResult(1, 0, PartitionFingerprint(1, "00000000000000ab"), self.seconds)


def _backfill(tmp_path: Path, engine: Any, ledger: SqliteLedger | None = None) -> backfill.Backfill:
    p = backfill.Project("truth")
    p.source("raw.t", grain="day", event_time="t")
    p.model("m", depends_on=["raw.t"], grain="day", event_time="t", sql="select 1")
    plan = p.plan("m", "2026-03-01", "2026-03-02", as_of="2026-12-01")
    return backfill.Backfill.create(
        p,
        plan,
        reason="errors tell the truth",
        engine=engine,
        ledger=ledger or SqliteLedger(tmp_path / "ledger.sqlite"),
    )


def _execute(bf: backfill.Backfill, c: Claim, **kw: Any) -> TaskOutcome:
    args: dict[str, Any] = {"lease_seconds": 60.0, "max_attempts": 3, "backoff": 0.0, **kw}
    return TaskExecutor(
        project=bf.project,
        engine=bf.engine,
        ledger=bf.ledger,
        backfill_id=bf.id,
        area=bf.area,
        worker=WORKER,
        **args,
    ).execute(c)


@pytest.mark.parametrize(
    "error",
    [
        _bug(),
        TypeError("run_task() takes 5 arguments"),
        NameError("name 'rows' is not defined"),
        ModuleNotFoundError("No module named 'x.y'"),
        AssertionError("result is None"),
    ],
)
def test_the_executor_never_retries_a_programming_error(tmp_path: Path, error: Exception) -> None:
    """Failed at once (permanent) with its type and message, though attempts are left; the
    runner does not run it again either."""
    engine = _Raising(error)
    bf = _backfill(tmp_path, engine)
    (c,) = bf.ledger.claim(bf.id, WORKER, 1, 60)
    out = _execute(bf, c, max_attempts=5)
    text = f"{type(error).__name__}: {error}"
    assert (out.status, out.transient, out.retry_at, out.error) == ("failed", False, None, text)
    assert f"attempt 1 failed (permanent): {text}" in out.message
    assert "transient" not in out.message and "did not answer" not in out.message
    assert bf.tasks()[0].status == "failed" and bf.ledger.claim(bf.id, WORKER, 1, 60) == []
    assert engine.calls == 1


def test_a_run_does_not_retry_a_programming_error(tmp_path: Path) -> None:
    engine = _Raising(_bug())
    bf = _backfill(tmp_path, engine)
    bf.run(max_attempts=4, backoff=0.0)
    assert engine.calls == 1
    (task,) = bf.tasks()
    assert task.status == "failed"
    assert task.error == "AttributeError: module 'confluent_kafka' has no attribute 'admin'"


def test_what_is_transient() -> None:
    for error in PROGRAMMING_ERRORS:
        assert not is_transient(error("bug"))
    assert is_transient(OSError("connection reset"))
    assert is_transient(TimeoutError("timed out"))
    assert is_transient(TaskFailure("locked", transient=True))
    assert not is_transient(TaskFailure("syntax", transient=False))
    assert not is_transient(InvalidInputError("bad period"))


class _BuggyRenewLedger(SqliteLedger):
    """A ledger backend whose renew has a bug (not a storage failure)."""

    def renew(self, backfill_id: str, worker: str, task_ids: Any, lease_seconds: float) -> int:
        raise _bug()


class _UnreachableRenewLedger(SqliteLedger):
    def renew(self, backfill_id: str, worker: str, task_ids: Any, lease_seconds: float) -> int:
        raise LedgerError("ledger /x: renewing leases failed: database is locked")


def test_a_bug_in_lease_renewal_is_raised_not_reported_as_a_lost_lease(tmp_path: Path) -> None:
    """The ledger's own errors propagate from TaskExecutor.execute; a bug of its renew is not turned
    into a lost lease (which another worker would retry)."""
    bf = _backfill(
        tmp_path, _Raising(None, seconds=0.6), _BuggyRenewLedger(tmp_path / "ledger.sqlite")
    )
    (c,) = bf.ledger.claim(bf.id, WORKER, 1, 0.2)
    with pytest.raises(AttributeError, match="has no attribute 'admin'"):
        _execute(bf, c, lease_seconds=0.2)


def test_a_failing_ledger_storage_still_ends_as_a_lost_lease(tmp_path: Path) -> None:
    bf = _backfill(
        tmp_path, _Raising(None, seconds=0.6), _UnreachableRenewLedger(tmp_path / "ledger.sqlite")
    )
    (c,) = bf.ledger.claim(bf.id, WORKER, 1, 0.2)
    out = _execute(bf, c, lease_seconds=0.2)
    assert (out.status, out.transient) == ("lost", True)


# -- Postgres -------------------------------------------------------------------------------------


def test_postgres_arrow_connection_errors_vs_a_bug(
    pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("adbc_driver_postgresql")
    import adbc_driver_postgresql.dbapi as adbc

    from backfill.engines.postgres.connection import Database, PostgresConnectionError

    refused = Database(f"postgresql://backfill:s3cret@127.0.0.1:{_closed_port()}/nowhere")
    with (
        pytest.raises(
            PostgresConnectionError,
            match=r"cannot open an Arrow \(ADBC\) "
            r"connection to .*:\*\*\*@.*refused",
        ),
        refused.arrow_cursor(),
    ):
        pass
    missing = Database(pg_server.url("no_such_database"))
    with (
        pytest.raises(PostgresConnectionError, match="no_such_database"),
        missing.arrow_cursor(),
    ):
        pass
    ok = Database(pg_server.create_database("truth"))
    try:
        with ok.arrow_cursor() as cur:  # the real thing works
            cur.execute("SELECT 1 AS one")
            assert cur.fetch_arrow_table().column("one").to_pylist() == [1]
    finally:
        ok.close()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise AttributeError("module 'adbc_driver_postgresql' has no attribute 'dbapi'")

    monkeypatch.setattr(adbc, "connect", broken)
    with (
        pytest.raises(AttributeError, match="no attribute 'dbapi'"),
        Database(pg_server.url()).arrow_cursor(),
    ):
        pass


# -- Spark (no session started: the write itself is replaced) -------------------------------------


@pytest.fixture
def spark_engine(tmp_path: Path) -> Any:
    pytest.importorskip("pyspark")
    from backfill.engines.spark import SparkEngine

    try:
        return SparkEngine(tmp_path / "warehouse")
    except InvalidInputError as exc:  # no Iceberg jar or no Java
        pytest.skip(str(exc))


def test_spark_run_task_labels_spark_errors_and_lets_bugs_through(
    spark_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from py4j.protocol import Py4JNetworkError
    from pyspark.errors import AnalysisException, PySparkTypeError

    p = backfill.Project("truth")
    p.source("raw.t", grain="day", event_time="t")
    p.model("m", depends_on=["raw.t"], grain="day", event_time="t", sql="select 1")
    start, end = dt.datetime(2026, 3, 1, tzinfo=UTC), dt.datetime(2026, 3, 2, tzinfo=UTC)

    def run(error: BaseException) -> Any:
        def write(*args: Any) -> Any:
            raise error

        monkeypatch.setattr(spark_engine, "_write", write)
        return spark_engine.run_task(p, "m", start, end, Area("bf_x", {}))

    with pytest.raises(AttributeError, match="has no attribute 'admin'"):
        run(_bug())
    with pytest.raises(PySparkTypeError):  # pyspark's own "wrong argument" is a TypeError
        run(
            PySparkTypeError(
                errorClass="NOT_STR", messageParameters={"arg_name": "col", "arg_type": "int"}
            )
        )
    with pytest.raises(TaskFailure, match=r"model 'm': SQL error: .*no_such_table") as raised:
        run(AnalysisException(message="[TABLE_OR_VIEW_NOT_FOUND] no_such_table"))
    assert not raised.value.transient
    with pytest.raises(TaskFailure, match="model 'm': Connection refused") as raised:
        run(Py4JNetworkError("Connection refused"))
    assert raised.value.transient


# -- dbt (the failure handed to every waiting task) ------------------------------------------------


def test_dbt_hands_a_bug_to_its_waiters_as_a_permanent_failure_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("dbt")
    from backfill.examples import dbt_shop
    from backfill.integrations.dbt.engine import DbtEngine
    from backfill.integrations.dbt.group import Request

    root = dbt_shop.create(tmp_path / "dbt_shop", data=False)
    engine = DbtEngine(root)

    def prepare(*args: Any) -> None:
        raise _bug()

    monkeypatch.setattr(engine, "_prepare", prepare)
    area = Area("bf_x", {})
    group = [
        Request("clean_orders", None, None, area),
        Request("fct_daily_sales", None, None, area),
    ]
    engine._run_group(None, group)
    for r in group:
        assert r.done.is_set() and isinstance(r.error, TaskFailure)
        assert str(r.error) == (
            f"model {r.model!r}: AttributeError: module 'confluent_kafka' has no attribute 'admin'"
        )
        assert not r.error.transient


# -- bad input handlers ---------------------------------------------------------------------------


def test_check_names_an_unreadable_partition() -> None:
    from backfill.audit.run_twice import _partition

    p = backfill.Project("truth")
    p.source("raw.t", grain="day", event_time="t")
    p.model("m", depends_on=["raw.t"], grain="day", event_time="t", sql="select 1")
    with pytest.raises(
        InvalidInputError,
        match=r"partition '2026-02-30' of m: expected an ISO "
        r"date .*2026-02 has 28 days",
    ):
        _partition(p, "m", "2026-02-30")
    assert _partition(p, "m", "2026-02-03")[0] == "2026-02-03"


def test_diff_names_a_missing_table_but_not_a_bug(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # `backfill diff schema.table` reads the table through the engine (Engine.table_rows)
    from backfill.engines.duckdb import DuckDBEngine

    engine = DuckDBEngine(tmp_path / "w.duckdb")
    with engine.connect() as cur:
        cur.execute("CREATE SCHEMA s; CREATE TABLE s.t AS SELECT 1 AS x")
    with engine.table_rows("s", "t") as rows:
        assert backfill.ArrowTable.from_arrow(rows).to_pylist() == [{"x": 1}]
    with pytest.raises(InvalidInputError, match=r"s\.nope: no such table"):
        engine.table_rows("s", "nope").__enter__()

    def broken(*args: Any) -> Any:
        raise _bug()

    monkeypatch.setattr(engine, "_columns", broken)
    with pytest.raises(AttributeError):
        engine.table_rows("s", "t").__enter__()
    engine.close()


def test_who_is_a_name() -> None:
    from backfill._stamps import who

    assert isinstance(who(), str) and who()


def test_programming_errors_are_what_the_issue_names() -> None:
    for error in (AttributeError, TypeError, NameError, ImportError):
        assert error in PROGRAMMING_ERRORS
    assert issubclass(UnboundLocalError, PROGRAMMING_ERRORS)
    assert not issubclass(OSError, PROGRAMMING_ERRORS)
    assert not issubclass(TimeoutError, PROGRAMMING_ERRORS)
