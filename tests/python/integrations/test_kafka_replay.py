"""Replay from Kafka against a real broker (KRaft, started once per session): the retention
check, landing a period exactly, consumer group resets, bad input."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import backfill  # noqa: E402
from backfill.cli import main  # noqa: E402
from backfill.errors import InvalidInputError, NotFoundError  # noqa: E402
from backfill.integrations.kafka.client import BrokerError  # noqa: E402
from backfill.model import ProjectError  # noqa: E402

UTC = dt.timezone.utc
DAY0 = dt.datetime(2026, 11, 1, tzinfo=UTC)
LATENESS = dt.timedelta(hours=2)


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def _topic(broker: Any, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def _produce(
    broker: Any,
    topic: str,
    records: list[tuple[str, bytes, dt.datetime]],
) -> list[dict[str, Any]]:
    """Produces (key, value, record time) in order; returns what landed where."""
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    out: list[dict[str, Any]] = []

    def done(err: Any, msg: Any) -> None:
        assert err is None, err
        out.append(
            {
                "partition": msg.partition(),
                "offset": msg.offset(),
                "value": msg.value(),
                "ts": msg.timestamp()[1],
            }
        )

    for key, value, t in records:
        p.produce(topic, value=value, key=key.encode(), timestamp=_ms(t), on_delivery=done)
    assert p.flush(30) == 0
    return out


def _orders(n: int, seed: int = 7) -> list[tuple[str, bytes, dt.datetime]]:
    """A deterministic order stream over 1-5 Nov: records arrive in time order, their event
    times are out of order; some arrive late within the lateness, some beyond it."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        event = DAY0 + dt.timedelta(seconds=rnd.randrange(0, 4 * 86400))
        delay = rnd.choice([0, 60, 600, 3600, 3 * 3600]) + rnd.randrange(0, 60)
        value = {
            "order_id": i,
            "customer_id": rnd.randrange(50),
            "amount": rnd.randrange(1, 500) / 4,
            "ordered_at": event.isoformat().replace("+00:00", "Z"),
        }
        if i % 10 == 3:
            del value["order_id"]  # the key field is in the message key only
        rows.append((str(i), json.dumps(value).encode(), event + dt.timedelta(seconds=delay)))
    rows.sort(key=lambda r: r[2])
    return rows


def _project(
    root: Path, broker: Any, topic: str, lateness: str = "2h", dead_letter: str | None = None
) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "backfill.yml").write_text(f"""
name: kshop
engine: {{type: duckdb, path: warehouse.duckdb}}
sources:
  kafka:
    orders:
      grain: day
      lands_in: raw_orders
      kafka:
        bootstrap: "{broker.bootstrap}"
        topic: {topic}
        format: json
        event_time: ordered_at
        key: order_id
        lateness: {lateness}
        timeout: 5{f"{chr(10)}        dead_letter: {dead_letter}" if dead_letter else ""}
        columns: {{order_id: int, customer_id: int, amount: float, ordered_at: timestamp}}
models:
  defaults: {{grain: day, begin: "2026-10-01"}}
""")
    (root / "models" / "daily_orders.sql").write_text(
        '{{ config(event_time="day") }}\n'
        "SELECT date_trunc('day', ordered_at) AS day, count(*) AS orders, sum(amount) AS revenue\n"
        'FROM {{ ref("raw_orders") }}\n'
        "WHERE ordered_at >= {{ start }} AND ordered_at < {{ end }} GROUP BY 1\n"
    )
    return root


@pytest.fixture(scope="module")
def stream(kafka_broker: Any) -> dict[str, Any]:
    _topic(kafka_broker, "orders", 3)
    produced = _produce(kafka_broker, "orders", _orders(3000))
    return {"broker": kafka_broker, "produced": produced}


def _oracle(produced: list[dict[str, Any]], start: dt.datetime, end: dt.datetime) -> set[Any]:
    keep = set()
    for r in produced:
        v = json.loads(r["value"])
        event = dt.datetime.fromisoformat(v["ordered_at"].replace("Z", "+00:00"))
        ts = dt.datetime.fromtimestamp(r["ts"] / 1000, UTC)
        if start <= event < end and start - LATENESS <= ts < end + LATENESS:
            keep.add((r["partition"], r["offset"]))
    return keep


def test_replay_lands_exactly_the_oracles_rows_idempotently(stream: Any, tmp_path: Path) -> None:
    project = backfill.Project.load(_project(tmp_path, stream["broker"], "orders"))
    start, end = DAY0 + dt.timedelta(days=1), DAY0 + dt.timedelta(days=3)
    plan = project.plan("source:kafka.orders+", start, end)
    assert [m.model for m in plan.models] == ["raw_orders", "daily_orders"]
    assert plan.ok, plan.findings
    check = plan.replay[0]
    assert [r.partition for r in check.ranges] == [0, 1, 2]
    assert "from" in plan.describe() and "records" in plan.describe()
    produced = stream["produced"]
    for r in check.ranges:
        # From the first record timestamped in the window (none before it is), to the log end: a
        # record of the window may come after records of later times.
        in_window = [
            p["offset"]
            for p in produced
            if p["partition"] == r.partition
            and _ms(start - LATENESS) <= p["ts"] < _ms(end + LATENESS)
        ]
        log_end = 1 + max(p["offset"] for p in produced if p["partition"] == r.partition)
        assert (r.from_offset, r.to_offset) == (min(in_window), log_end)
    # Lateness counts from the end of each landing period (a day), not of the whole replay.
    expected = _oracle(produced, start, start + dt.timedelta(days=1)) | _oracle(
        produced, start + dt.timedelta(days=1), end
    )
    assert len(expected) > 500 and len(expected) < len(_oracle(produced, start, end))

    import duckdb

    for attempt in range(2):  # a second replay of the same period leaves the same table
        bf = project.backfill(
            project.plan("source:kafka.orders+", start, end),
            reason=f"replay {attempt}",
            direct=True,
        )
        status = bf.run(concurrency=2)
        assert status.ok, status
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as db:
            got = db.execute(
                "SELECT _kafka_partition, _kafka_offset, order_id FROM raw_orders"
            ).fetchall()
            daily = db.execute("SELECT sum(orders) FROM daily_orders").fetchone()
        assert {(p, o) for p, o, _ in got} == expected
        assert len(got) == len(expected) and all(k is not None for _, _, k in got)
        assert daily is not None and daily[0] == len(expected)
        details = [a.detail for a in bf.ledger.attempts(bf.id) if a.detail]
        assert len(details) == 2  # one landing task per day, each recorded its ranges
        assert sum(r["kept"] for d in details for r in d["kafka"]["ranges"]) == len(expected)


def _order(i: int, event: dt.datetime) -> bytes:
    return json.dumps(
        {
            "order_id": i,
            "customer_id": i % 50,
            "amount": 2.5,
            "ordered_at": event.isoformat().replace("+00:00", "Z"),
        }
    ).encode()


def _more_orders(first_id: int, start: dt.datetime, end: dt.datetime) -> list[Any]:
    """Records of [start, end) produced after a replay of it: on time, with a record time up to
    the lateness before the period or after it (kept), beyond the lateness (not kept), and one of
    the next period (not kept). (key, value, record time), as :func:`_produce` takes them."""
    made = [
        (start + dt.timedelta(hours=6), start + dt.timedelta(hours=6, minutes=1)),
        (start + dt.timedelta(minutes=10), start - LATENESS + dt.timedelta(minutes=5)),
        (end - dt.timedelta(minutes=10), end + LATENESS - dt.timedelta(minutes=5)),
        (end - dt.timedelta(minutes=20), end + LATENESS + dt.timedelta(minutes=5)),
        (end + dt.timedelta(hours=5), end + dt.timedelta(hours=5)),
    ]
    # Three of each: their keys spread them over the partitions.
    return [(str(i), _order(i, event), ts) for i, (event, ts) in enumerate(made * 3, first_id)]


def test_a_replay_after_more_records_lands_them_in_this_process_and_in_a_new_one(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """A topic is in arrival order, not time order: records of a period produced after it was
    replayed (late ones too) sit at offsets after records of later periods. Replaying the period
    again lands exactly the oracle's rows of everything produced so far, in the process that
    replayed it before and in a new one."""
    import duckdb

    _topic(kafka_broker, "rerun_orders", 2)
    produced = _produce(kafka_broker, "rerun_orders", _orders(600, seed=5))
    root = _project(tmp_path, kafka_broker, "rerun_orders")
    project = backfill.Project.load(root)
    start, end = DAY0 + dt.timedelta(days=1), DAY0 + dt.timedelta(days=2)

    def landed() -> list[tuple[int, int]]:
        with duckdb.connect(str(root / "warehouse.duckdb"), read_only=True) as db:
            rows = db.execute("SELECT _kafka_partition, _kafka_offset FROM raw_orders").fetchall()
        return [(p, o) for p, o in rows]

    def replay(reason: str) -> None:
        plan = project.plan("raw_orders", start, end)
        status = project.backfill(plan, reason=reason, direct=True).run()
        assert status.ok, status

    replay("first")
    assert sorted(landed()) == sorted(_oracle(produced, start, end))

    more = _produce(kafka_broker, "rerun_orders", _more_orders(10_000, start, end))
    assert len(_oracle(more, start, end)) == 9  # on time, early and late within the lateness
    produced += more
    replay("again, same process")
    assert sorted(landed()) == sorted(_oracle(produced, start, end))

    # Undecodable, but of the next period: not this period's to read, nor to fail on.
    other = [("29999", b"{not json", end + dt.timedelta(hours=5))]
    produced += _produce(kafka_broker, "rerun_orders", _more_orders(20_000, start, end))
    _produce(kafka_broker, "rerun_orders", other)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill.cli",
            "run",
            "--project",
            str(root),
            "--select",
            "raw_orders",
            "--start",
            start.isoformat(),
            "--end",
            end.isoformat(),
            "--direct",
            "--reason",
            "again, new process",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(landed()) == sorted(_oracle(produced, start, end))

    # An undecodable record of the period produced since: the next replay reads it and fails.
    (bad,) = _produce(kafka_broker, "rerun_orders", [("1", b"{not json", start)])
    status = project.backfill(
        project.plan("raw_orders", start, end), reason="bad since", direct=True
    ).run()
    assert not status.ok
    assert f"topic rerun_orders partition {bad['partition']} offset {bad['offset']}" in str(status)


def test_undecodable_record_fails_the_task_naming_its_offset(
    kafka_broker: Any, tmp_path: Path
) -> None:
    _topic(kafka_broker, "bad_orders", 1)
    t = DAY0 + dt.timedelta(hours=5)
    good = json.dumps(
        {"order_id": 1, "customer_id": 1, "amount": 1.0, "ordered_at": t.isoformat()}
    ).encode()
    _produce(kafka_broker, "bad_orders", [("1", good, t), ("2", b"{not json", t)])
    project = backfill.Project.load(_project(tmp_path, kafka_broker, "bad_orders"))
    bf = project.backfill(
        project.plan("raw_orders", DAY0, DAY0 + dt.timedelta(days=1)), reason="bad", direct=True
    )
    status = bf.run()
    assert not status.ok
    assert "topic bad_orders partition 0 offset 1" in str(status)


def test_undecodable_records_go_to_the_dead_letter_table_when_configured(
    kafka_broker: Any, tmp_path: Path
) -> None:
    _topic(kafka_broker, "dlq_orders", 2)
    t = DAY0 + dt.timedelta(hours=5)

    def order(i: int, **over: Any) -> bytes:
        return json.dumps(
            {"order_id": i, "customer_id": 1, "amount": 1.5, "ordered_at": t.isoformat(), **over}
        ).encode()

    records = [(str(i), order(i), t) for i in range(200)]
    records[17] = ("17", b"{not json", t)
    records[101] = ("101", order(101, amount="lots"), t)  # JSON, but a field of the wrong type
    records[150] = ("150", b"[1, 2]", t)
    later = DAY0 + dt.timedelta(days=1, hours=5)  # another period's bad record: not this task's
    records.append(("999", b"\x00garbage", later))
    produced = _produce(kafka_broker, "dlq_orders", records)
    where = {
        json.loads(r["value"])["order_id"] if r["value"].startswith(b'{"') else r["value"]: (
            r["partition"],
            r["offset"],
        )
        for r in produced
    }
    bad = {
        where[b"{not json"]: b"{not json",
        where[101]: order(101, amount="lots"),
        where[b"[1, 2]"]: b"[1, 2]",
    }
    root = _project(tmp_path, kafka_broker, "dlq_orders", dead_letter="raw_orders_dead")
    project = backfill.Project.load(root)
    import duckdb

    for attempt in range(2):  # running it again leaves the same rows in both tables
        bf = project.backfill(
            project.plan("raw_orders", DAY0, DAY0 + dt.timedelta(days=1)),
            reason=f"dlq {attempt}",
            direct=True,
        )
        status = bf.run()
        assert status.ok, status
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as db:
            landed = db.execute("SELECT order_id FROM raw_orders ORDER BY 1").fetchall()
            dead = db.execute(
                'SELECT topic, partition, "offset", value, error, '
                "record_timestamp FROM raw_orders_dead"
            ).fetchall()
        assert [r[0] for r in landed] == [i for i in range(200) if i not in (17, 101, 150)]
        assert {(p, o): v for _, p, o, v, _, _ in dead} == bad
        assert {r[0] for r in dead} == {"dlq_orders"}
        assert {r[5] for r in dead} == {t.replace(tzinfo=None)}
        errors = {(p, o): e for _, p, o, _, e, _ in dead}
        assert "not JSON" in errors[where[b"{not json"]]
        assert (
            "amount" in errors[where[101]] and "expected a JSON object" in errors[where[b"[1, 2]"]]
        )
        assert all(f"partition {p} offset {o}" in e for (p, o), e in errors.items())
        (detail,) = [a.detail for a in bf.ledger.attempts(bf.id) if a.detail]
        assert detail["kafka"]["dead_letters"] == 3


def test_retention_moved_log_start_is_reported_with_its_span(
    kafka_broker: Any, tmp_path: Path
) -> None:
    _topic(kafka_broker, "ret_orders", 2)
    rows = [
        (
            str(i),
            json.dumps(
                {
                    "order_id": i,
                    "customer_id": 0,
                    "amount": 1.0,
                    "ordered_at": (DAY0 + dt.timedelta(hours=i)).isoformat(),
                }
            ).encode(),
            DAY0 + dt.timedelta(hours=i),
        )
        for i in range(48)
    ]
    produced = _produce(kafka_broker, "ret_orders", rows)
    part0 = sorted((r for r in produced if r["partition"] == 0), key=lambda r: r["offset"])
    cut = part0[len(part0) // 2]
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for f in admin.delete_records([ck.TopicPartition("ret_orders", 0, cut["offset"])]).values():
        f.result(30)
    project = backfill.Project.load(_project(tmp_path, kafka_broker, "ret_orders"))
    plan = project.plan("raw_orders+", DAY0, DAY0 + dt.timedelta(days=2))
    errors = [f for f in plan.findings if f.code == "RETENTION"]
    assert len(errors) == 1 and not plan.ok
    oldest = dt.datetime.fromtimestamp(cut["ts"] / 1000, UTC)
    msg = errors[0].message
    assert "topic ret_orders partition 0" in msg
    assert f"offset {cut['offset']}" in msg and f"{oldest:%Y-%m-%d %H:%M:%S}" in msg
    assert f"missing span [{DAY0 - LATENESS:%Y-%m-%d %H:%M:%S}, {oldest:%Y-%m-%d %H:%M:%S})" in msg
    r0 = plan.replay[0].ranges[0]
    assert (r0.earliest, r0.earliest_time) == (cut["offset"], oldest)


def _committed(broker: Any, group: str, topic: str, parts: int) -> dict[int, int]:
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([ck.TopicPartition(topic, p) for p in range(parts)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def test_reset_group_refuses_active_members_then_moves_and_undoes(
    stream: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = stream["broker"]
    root = _project(tmp_path, broker, "orders")
    member = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "etl",
            "auto.offset.reset": "latest",
            "enable.auto.commit": False,
        }
    )
    member.subscribe(["orders"])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    member.commit(
        offsets=[ck.TopicPartition("orders", p, 10 + p) for p in range(3)], asynchronous=False
    )
    before = _committed(broker, "etl", "orders", 3)
    args = [
        "replay",
        "reset-group",
        "etl",
        "--topic",
        "orders",
        "--to",
        "2026-11-02",
        "--project",
        str(root),
    ]
    assert main(args) == 0  # the dry run changes nothing
    assert _committed(broker, "etl", "orders", 3) == before
    assert main([*args, "--execute"]) == 1
    out = capsys.readouterr().out
    assert "refused" in out and member.memberid() in out
    assert _committed(broker, "etl", "orders", 3) == before
    member.close()

    assert main([*args, "--execute"]) == 0
    produced = stream["produced"]
    expected = {
        p: min(
            r["offset"]
            for r in produced
            if r["partition"] == p and r["ts"] >= _ms(DAY0 + dt.timedelta(days=1))
        )
        for p in range(3)
    }
    assert _committed(broker, "etl", "orders", 3) == expected
    project = backfill.Project.load(root)
    from backfill.run import ledger_for

    (reset,) = ledger_for(project).offset_resets("etl", "orders")
    assert reset.offsets_old == dict(before)
    assert len(project.changelog(reset["reset_id"]).to_pandas()) == 3

    reader = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "etl", "enable.auto.commit": False}
    )
    reader.subscribe(["orders"])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 30
    while len(first) < 3 and time.monotonic() < deadline:
        m = reader.poll(0.5)
        if m is not None and m.error() is None:
            first.setdefault(m.partition(), m.offset())
    reader.close()
    assert first == expected  # a real consumer of the group reads from the recorded offsets

    assert (
        main(
            ["replay", "reset-group", "etl", "--topic", "orders", "--undo", "--project", str(root)]
        )
        == 0
    )
    assert _committed(broker, "etl", "orders", 3) == before


def test_bad_input_is_refused_before_anything_is_written(stream: Any, tmp_path: Path) -> None:
    broker = stream["broker"]
    project = backfill.Project.load(_project(tmp_path / "a", broker, "no_such_topic"))
    with pytest.raises(NotFoundError, match=r"no_such_topic.*orders"):
        project.plan("raw_orders", DAY0, DAY0 + dt.timedelta(days=1))
    project = backfill.Project.load(_project(tmp_path / "b", broker, "orders"))
    future = dt.datetime.now(UTC) + dt.timedelta(days=3)
    with pytest.raises(InvalidInputError, match="future"):
        from backfill.integrations.kafka.retention import check_source

        check_source(
            project.models["raw_orders"].meta["landing"],
            "raw_orders",
            future,
            future + dt.timedelta(days=1),
        )
    with pytest.raises(ProjectError, match="lateness 'soon' is not a duration"):
        backfill.Project.load(_project(tmp_path / "c", broker, "orders", lateness="soon"))
    with pytest.raises(
        ProjectError, match=re.escape("kafka.dead_letter 'dead letters' must be a table")
    ):
        backfill.Project.load(
            _project(tmp_path / "e", broker, "orders", dead_letter="'dead letters'")
        )
    with pytest.raises(
        ProjectError, match=re.escape("kafka.dead_letter 'raw_orders' is the landing")
    ):
        backfill.Project.load(_project(tmp_path / "f", broker, "orders", dead_letter="raw_orders"))

    class Nowhere:
        bootstrap = "127.0.0.1:1"

    project = backfill.Project.load(_project(tmp_path / "d", Nowhere, "orders"))
    began = time.monotonic()
    with pytest.raises(BrokerError, match=re.escape("127.0.0.1:1 did not answer within 5s")):
        project.plan("raw_orders", DAY0, DAY0 + dt.timedelta(days=1))
    assert time.monotonic() - began < 30
    assert not (tmp_path / "d" / "warehouse.duckdb").exists()
    assert not (tmp_path / "d" / ".backfill").exists()


AVRO_ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "order_id", "type": ["null", "long"], "default": None},
        {"name": "customer_id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "ordered_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def test_avro_records_land_exactly_the_oracles_rows(kafka_broker: Any, tmp_path: Path) -> None:
    """The same order stream as schemaless Avro (the writer's schema in backfill.yml): the rows
    of a period are the oracle's; a record that is not of the schema fails naming its offset."""
    import io

    import fastavro

    schema = fastavro.parse_schema(AVRO_ORDER)

    def avro(value: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, value)
        return out.getvalue()

    records = []
    for key, raw, t in _orders(600, seed=11):
        v = json.loads(raw)
        v.setdefault("order_id", None)
        v["ordered_at"] = dt.datetime.fromisoformat(v["ordered_at"].replace("Z", "+00:00"))
        records.append((key, avro(v), t))
    _topic(kafka_broker, "avro_orders", 2)
    produced = _produce(kafka_broker, "avro_orders", records)
    root = _project(tmp_path, kafka_broker, "avro_orders")
    yml = root / "backfill.yml"
    yml.write_text(
        yml.read_text().replace(
            "format: json", f"format: avro\n        schema: {json.dumps(AVRO_ORDER)}"
        )
    )
    project = backfill.Project.load(root)
    start, end = DAY0 + dt.timedelta(days=1), DAY0 + dt.timedelta(days=2)
    bf = project.backfill(project.plan("raw_orders", start, end), reason="avro replay", direct=True)
    assert bf.run().ok
    import duckdb

    events = {}
    for r in produced:
        v = fastavro.schemaless_reader(io.BytesIO(r["value"]), schema, None)
        events[(r["partition"], r["offset"])] = v["ordered_at"]
    expected = set()
    for r in produced:
        ts = dt.datetime.fromtimestamp(r["ts"] / 1000, UTC)
        event = events[(r["partition"], r["offset"])]
        if start <= event < end and start - LATENESS <= ts < end + LATENESS:
            expected.add(event)
    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        got = [r[0] for r in con.sql("SELECT ordered_at FROM raw_orders").fetchall()]
    finally:
        con.close()
    assert expected and len(got) == len(expected)
    assert {g.replace(tzinfo=UTC) if g.tzinfo is None else g for g in got} == expected


def _avro(value: dict[str, Any]) -> bytes:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_ORDER), value)
    return out.getvalue()


def test_an_avro_record_not_of_the_schema_fails_naming_its_offset(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """The bad record arrives after the period was replayed, behind a record of the next day:
    the re-run in the same project reads it and fails naming its offset."""
    _topic(kafka_broker, "avro_bad", 1)
    t = DAY0 + dt.timedelta(hours=5)
    good = _avro({"order_id": 1, "customer_id": 1, "amount": 1.0, "ordered_at": t})
    later = t + dt.timedelta(days=1)
    tomorrow = _avro({"order_id": 2, "customer_id": 1, "amount": 1.0, "ordered_at": later})
    _produce(kafka_broker, "avro_bad", [("1", good, t), ("2", tomorrow, later)])
    root = _project(tmp_path, kafka_broker, "avro_bad")
    yml = root / "backfill.yml"
    yml.write_text(
        yml.read_text().replace(
            "format: json", f"format: avro\n        schema: {json.dumps(AVRO_ORDER)}"
        )
    )
    project = backfill.Project.load(root)

    def replay() -> Any:
        plan = project.plan("raw_orders", DAY0, DAY0 + dt.timedelta(days=1))
        return project.backfill(plan, reason="avro", direct=True).run()

    assert replay().ok
    _produce(kafka_broker, "avro_bad", [("3", b"\x01", t)])
    status = replay()
    assert not status.ok
    assert "topic avro_bad partition 0 offset 2" in str(status)
