"""The Postgres ledger beyond the conformance suite (which it passes like SQLite): what a shared
server adds -- connections lost mid-run, the database's clock for leases, errors that name the
URL with its password masked, permissions, schemas, concurrent first opens. Against the session's
throwaway server (``pg_server``), never mocks."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
import backfill.errors
from backfill.errors import InvalidInputError
from backfill.run.ledger import LedgerError, ledger_for, open_ledger
from backfill.run.ledger.postgres import PostgresLedger, mask_url
from backfill.run.ledger.schema import SCHEMA_VERSION
from pg_support import _as_owner, free_port, pg_bindir

LIVE, OTHER = "otherhost:1:live", "otherhost:2:other"


def record(bid: str) -> dict[str, Any]:
    return {
        "id": bid,
        "project": "p",
        "project_root": None,
        "selection": "m+",
        "exclude": None,
        "start": "2026-01-01",
        "end": "2026-02-01",
        "as_of": None,
        "reason": "test",
        "mode": "audit",
        "engine": "none",
        "plan": "{}",
        "models": "{}",
        "created_by": "me",
    }


def tasks(n: int, deps: dict[int, list[int]] | None = None) -> list[dict[str, Any]]:
    deps = deps or {}
    return [
        {
            "task_id": i,
            "model": "m",
            "start": None,
            "end": None,
            "label": f"p{i}",
            "partitions": 1,
            "wave": i // 100,
            "depends_on": deps.get(i, []),
        }
        for i in range(n)
    ]


WORKER = r"""
import json, logging, sys, time
from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
from backfill.run.ledger import TaskEnd, new_worker_id, open_ledger

logging.basicConfig(level=logging.WARNING)  # the retries' warnings, on stderr

url, bid = sys.argv[1], sys.argv[2]
FP = TaskFingerprint(PartitionFingerprint.of(1, 1))
ledger, me, out = open_ledger(url), new_worker_id(), []
while True:
    claims = ledger.claim(bid, me, 3, 2.0)
    if not claims:
        if all(t.status == "done" for t in ledger.tasks(bid)):
            break
        time.sleep(0.02)
        continue
    for c in claims:
        time.sleep(0.01)  # the task's work
        outcome = ledger.finish(c, bid, me, TaskEnd.success(0.0, 1, 0, FP))
        out.append([c.task.task_id, outcome])
print(json.dumps(out))
"""


def _terminate_all(admin_url: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as db:
        return len(
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "application_name = 'backfill' AND pid <> pg_backend_pid()"
            ).fetchall()
        )


def _wait_done(url: str, at_least: int) -> int:
    """How many tasks are done, once at least ``at_least`` are (read outside the ledger)."""
    deadline = time.monotonic() + 120
    while True:
        with psycopg.connect(url, application_name="test") as db:
            row = db.execute(
                "SELECT count(*) FROM backfill_ledger.tasks WHERE status = 'done'"
            ).fetchone()
        done = int(row[0]) if row else 0
        if done >= at_least or time.monotonic() > deadline:
            return done
        time.sleep(0.05)


def _restart(server: Any) -> None:
    # The new postmaster must not inherit a pipe of ours (it would keep it open): log to a file.
    subprocess.run(
        _as_owner(
            [
                str(pg_bindir() / "pg_ctl"),
                "-D",
                str(server.data),
                "-m",
                "fast",
                "-l",
                str(server.base / "server.log"),
                "-w",
                "-t",
                "60",
                "restart",
            ]
        ),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )


def test_workers_survive_lost_connections_and_a_restart_exactly_once(pg_server: Any) -> None:
    url = pg_server.create_database("loss")
    n = 900
    deps = {i: [i - 100] for i in range(100, n)}
    led = open_ledger(url)
    led.create_backfill(record("b1"), tasks(n, deps))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, "b1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    led.close()
    _wait_done(url, 100)
    assert _terminate_all(pg_server.url()) > 0  # every worker's connections, mid-run
    _wait_done(url, 250)
    _restart(pg_server)  # the server itself goes away and comes back
    assert _wait_done(url, 0) < n  # both happened mid-run
    outcomes: dict[int, list[str]] = {}
    logs = ""
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        logs += err
        for task_id, outcome in json.loads(out):
            outcomes.setdefault(task_id, []).append(outcome)
    assert "retrying in" in logs, logs  # the workers did lose their connections
    led = open_ledger(url)
    assert all(t.status == "done" for t in led.tasks("b1"))
    assert sorted(outcomes) == list(range(n))
    assert all(o.count("done") == 1 for o in outcomes.values()), "a task finished twice"
    done = [a["task_id"] for a in led.attempts("b1") if a["status"] == "done"]
    assert sorted(done) == list(range(n))  # one done attempt per task
    led.close()


def test_leases_follow_the_database_clock_not_the_workers(
    pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    led = open_ledger(pg_server.create_database("clock"))
    led.create_backfill(record("b1"), tasks(2))
    led.claim("b1", LIVE, 1, 60)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)  # this host's clock runs an hour fast
    assert [c.task.task_id for c in led.claim("b1", OTHER, 2, 60)] == [1]  # task 0 stays held
    assert led.live_workers("b1") == {LIVE, OTHER}
    led.close()


def test_errors_name_the_url_with_the_password_masked(pg_server: Any) -> None:
    url = f"postgresql://backfill:s3cret@127.0.0.1:{pg_server.port}/no_such_db"
    with pytest.raises(LedgerError) as err:
        open_ledger(url)
    text = str(err.value)
    assert "s3cret" not in text
    assert (
        f"ledger postgresql://backfill:***@127.0.0.1:{pg_server.port}/no_such_db: opening failed"
        in text
        and 'database "no_such_db" does not exist' in text
    )
    assert mask_url("postgres://u:p@h/db?schema=x") == "postgres://u:***@h/db?schema=x"


def test_an_unreachable_server_fails_fast_with_a_clear_error() -> None:
    began = time.monotonic()
    port = free_port()
    with pytest.raises(
        LedgerError,
        match=rf"ledger postgresql://u:\*\*\*@127.0.0.1:{port}/db: "
        "opening failed: .*(refused|connect)",
    ):
        open_ledger(f"postgresql://u:pw@127.0.0.1:{port}/db")
    with pytest.raises(LedgerError, match=re.escape("nohost.invalid")):
        open_ledger("postgresql://u@nohost.invalid:5432/db")
    assert time.monotonic() - began < 15


def test_a_database_without_permissions_is_refused_before_anything_is_written(
    pg_server: Any,
) -> None:
    url = pg_server.create_database("perm")
    with psycopg.connect(url, autocommit=True) as db:
        # Roles belong to the whole (session-wide) cluster: a name of this test's own.
        db.execute("DROP ROLE IF EXISTS weak_ledger; CREATE ROLE weak_ledger LOGIN")
    weak = url.replace("backfill@", "weak_ledger@")
    with pytest.raises(
        LedgerError,
        match=r"ledger postgresql://weak_ledger@.*: opening failed: "
        "permission denied",
    ):
        open_ledger(weak)
    with psycopg.connect(url) as db:
        assert db.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'backfill_ledger'"
        ).fetchone() == (0,)


def test_bad_urls_are_named() -> None:
    with pytest.raises(
        InvalidInputError,
        match=r"'postgresql://u:\*\*\*@h'.*expected "
        "postgresql://user",
    ):
        open_ledger("postgresql://u:secret@h")
    with pytest.raises(InvalidInputError, match="schema 'Bad-Name'"):
        open_ledger("postgresql://u@h/db?schema=Bad-Name")
    with pytest.raises(InvalidInputError, match="unknown scheme 'mysql'"):
        open_ledger("mysql://u@h/db")


def test_schemas_keep_ledgers_apart(pg_server: Any) -> None:
    url = pg_server.create_database("schemas")
    a, b = open_ledger(url), open_ledger(url + "?schema=team_b")
    a.create_backfill(record("b1"), tasks(1))
    assert b.backfills() == [] and [r["id"] for r in a.backfills()] == ["b1"]
    assert isinstance(b, PostgresLedger) and b.schema == "team_b"
    a.close()
    b.close()


def test_many_first_opens_at_once_create_the_ledger_once(pg_server: Any) -> None:
    url = pg_server.create_database("race")
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            open_ledger(url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(url) as db:
        assert db.execute("SELECT value FROM backfill_ledger.meta").fetchall() == [
            (str(SCHEMA_VERSION),)
        ]


# -- where a ledger is named: backfill.yml, the CLI, the Airflow integration ------------------
def test_the_shop_runs_audits_and_publishes_on_a_postgres_ledger(
    pg_server: Any, built_shop: Path, tmp_path: Path
) -> None:
    from shop_support import AS_OF, cli, copy_built

    root = copy_built(built_shop, tmp_path / "shop")
    url = pg_server.create_database("shop")
    yml = root / "backfill.yml"
    yml.write_text(yml.read_text().replace("state: .backfill ", f"state: {url} "))
    assert isinstance(ledger_for(backfill.Project.load(root)), PostgresLedger)
    ran = cli(
        "run",
        "--project",
        str(root),
        "--select",
        "fct_daily_sales",
        "--start",
        "2026-08-01",
        "--end",
        "2026-08-04",
        "--as-of",
        AS_OF,
        "--reason",
        "pg",
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    (recorded,) = open_ledger(url).backfills()
    assert recorded["status"] == "done" and not (root / ".backfill" / "ledger.sqlite").exists()
    # --ledger names the same ledger from a project whose backfill.yml says nothing of it
    yml.write_text(yml.read_text().replace(f"state: {url} ", "state: .backfill "))
    listed = cli("status", "--project", str(root), "--list", "--json", "--ledger", url)
    assert [r["id"] for r in json.loads(listed.stdout)] == [recorded["id"]], listed.stderr
    for args in (["audit", recorded["id"]], ["publish", recorded["id"], "--note", "n"]):
        done = cli(*args, "--project", str(root), "--ledger", url, "--json")
        assert done.returncode == 0, done.stderr
    assert open_ledger(url).backfill(recorded["id"])["status"] == "published"


def test_the_airflow_integration_opens_postgres_urls(pg_server: Any) -> None:
    from backfill.integrations.airflow.tasks import _ledger

    url = pg_server.create_database("airflow")
    assert isinstance(_ledger(backfill.Project("p"), url), PostgresLedger)


def test_a_state_url_of_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "backfill.yml").write_text("name: p\nstate: mysql://u:pw@h/db\n")
    with pytest.raises(backfill.errors.BackfillError, match=r"state mysql://\.\.\.: expected"):
        backfill.Project.load(tmp_path)


def test_a_wrong_password_is_named_with_the_password_masked() -> None:
    from pg_support import PgServer

    server = PgServer.start()  # its own: the session's server trusts every local connection
    try:
        with psycopg.connect(server.url(), autocommit=True) as db:
            db.execute("CREATE ROLE keeper LOGIN PASSWORD 'right-one'")
        hba = server.data / "pg_hba.conf"
        subprocess.run(
            _as_owner(
                [
                    "sh",
                    "-c",
                    f"echo 'host all keeper 127.0.0.1/32 "
                    f"scram-sha-256' | cat - {hba} > {hba}.new && "
                    f"mv {hba}.new {hba}",
                ]
            ),
            check=True,
        )
        subprocess.run(
            _as_owner([str(pg_bindir() / "pg_ctl"), "-D", str(server.data), "reload"]),
            check=True,
            capture_output=True,
        )
        time.sleep(0.5)
        bad = f"postgresql://keeper:wrong-one@127.0.0.1:{server.port}/postgres"
        with pytest.raises(LedgerError) as err:
            open_ledger(bad)
        assert "wrong-one" not in str(err.value)
        assert (
            f"ledger postgresql://keeper:***@127.0.0.1:{server.port}/postgres: opening "
            "failed" in str(err.value)
        )
        assert 'password authentication failed for user "keeper"' in str(err.value)
    finally:
        server.stop()


def test_the_prepared_finish_numbers_its_placeholders_and_refuses_unknown_ones() -> None:
    from backfill.run.ledger import postgres_sql as q
    from backfill.run.ledger.postgres_fast import positional
    from backfill.run.ledger.states import TaskState

    assert positional(b"SELECT %(b)s, %(a)s, %(b)s", ["a", "b"]) == b"SELECT $2, $1, $2"
    with pytest.raises(ValueError, match="c"):
        positional(b"SELECT %(c)s", ["a"])
    name, sql = q.finish(TaskState.DONE)
    assert b"%(" not in sql and name == b"backfill_finish_done"
    assert len(q.FINISH_PARAMS) == len(q.FINISH_TYPES)
    assert q.finish(TaskState.DONE) is q.finish(TaskState.DONE)  # built once


def _exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_full_claim_checks_this_hosts_workers_at_most_every_local_check_seconds(
    pg_server: Any,
) -> None:
    # A claim that gets every task it asked for skips the check of this host's pids (it read
    # every lease of the backfill); a short claim, or one after local_check_seconds, makes it.
    import socket

    ledger = PostgresLedger(pg_server.create_database())
    try:
        ledger.create_backfill(record("b1"), tasks(4))
        assert [c.task.task_id for c in ledger.claim("b1", OTHER, 1, 60)] == [0]
        ledger.local_check_seconds = 600.0
        dead = f"{socket.gethostname()}:{_exited_pid()}:gone"
        assert [c.task.task_id for c in ledger.claim("b1", dead, 1, 600)] == [1]
        assert [c.task.task_id for c in ledger.claim("b1", OTHER, 1, 60)] == [2]
        assert ledger.tasks("b1")[1].status == "running"  # not checked yet: still the dead's
        ledger.local_check_seconds = 0.0
        assert [c.task.task_id for c in ledger.claim("b1", OTHER, 1, 60)] == [3]  # and checks
        assert ledger.tasks("b1")[1].status == "pending"
        ledger.local_check_seconds = 600.0
        (again,) = ledger.claim("b1", OTHER, 5, 60)
        assert (again.task.task_id, again.attempt) == (1, 2)
        assert [a["status"] for a in ledger.attempts("b1")].count("abandoned") == 1
    finally:
        ledger.close()


def test_claims_find_expired_leases_through_the_index_of_expiries(pg_server: Any) -> None:
    # Schema version 8: the probe every claim makes reads the index, not every lease row.
    url = pg_server.create_database()
    ledger = PostgresLedger(url)
    try:
        ledger.create_backfill(record("b1"), tasks(3))
        ledger.claim("b1", LIVE, 2, 0.05)
        time.sleep(0.1)
        assert [c.task.task_id for c in ledger.claim("b1", OTHER, 1, 60)] == [0]  # not 2
    finally:
        ledger.close()
    with psycopg.connect(url) as db:
        db.execute("SET search_path = backfill_ledger")
        db.execute("SET enable_seqscan = off")  # a table of three rows: as on a large one
        plan = "\n".join(
            str(r[0])
            for r in db.execute(
                "EXPLAIN SELECT 1 FROM leases WHERE backfill_id = 'b1' "
                "AND expires_at < statement_timestamp()"
            )
        )
    assert "Index Cond: ((backfill_id = 'b1'::text) AND (expires_at < statement_timestamp()))" in (
        plan
    ), plan
    assert "leases_expiry" in plan, plan


def test_claim_task_claims_in_one_statement_and_says_why_not_otherwise(pg_server: Any) -> None:
    from backfill.run.ledger import Claim, TaskBusyError
    from backfill.run.ledger.records import BackfillHeldError

    ledger = PostgresLedger(pg_server.create_database())
    try:
        ledger.create_backfill(record("b1"), tasks(3, {1: [0]}))
        with pytest.raises(backfill.errors.ConflictError, match="depends on tasks not done"):
            ledger.claim_task("b1", 1, LIVE, 60)
        first = ledger.claim_task("b1", 0, LIVE, 60)
        assert isinstance(first, Claim) and first.attempt == 1
        with pytest.raises(TaskBusyError):
            ledger.claim_task("b1", 0, OTHER, 60)
        ledger.set_paused("b1", True, "me")
        with pytest.raises(BackfillHeldError):
            ledger.claim_task("b1", 2, OTHER, 60)
        assert [t.status for t in ledger.tasks("b1")] == ["running", "pending", "pending"]
    finally:
        ledger.close()


def _claim_plan(url: str, floor: dict[str, int]) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of a claim of one task of b1 from ``floor``, rolled back."""
    from backfill.run.ledger import postgres_sql as q

    _, sql = q.claim(1)
    values = {"b": "b1", "w": OTHER, "secs": 60.0, "tok": "t", **floor}
    with psycopg.connect(url) as db:
        db.execute("SET search_path = backfill_ledger")
        db.execute(
            b"PREPARE claim_one (text, text, float8, text, bigint, integer, integer) AS " + sql
        )
        args = ", ".join(
            str(values[p]) if isinstance(values[p], (int, float)) else f"'{values[p]}'"
            for p in q.CLAIM_PARAMS
        )
        row = db.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE claim_one ({args})"
        ).fetchone()
        db.rollback()
    assert row is not None
    return dict(row[0][0])


def _scans_of(node: dict[str, Any], index: str) -> list[dict[str, Any]]:
    found = [node] if node.get("Index Name") == index else []
    for child in node.get("Plans", []):
        found += _scans_of(child, index)
    return found


def test_claims_start_past_the_tasks_claimed_before(pg_server: Any) -> None:
    # Schema version 10: the index of pending tasks keeps an entry for each task claimed since
    # the last VACUUM; a claim from its handle's floor reads none of them, one without reads all.
    url = pg_server.create_database()
    ledger = PostgresLedger(url)
    try:
        with psycopg.connect(url, autocommit=True) as db:  # no VACUUM during the test
            db.execute("ALTER TABLE backfill_ledger.tasks SET (autovacuum_enabled = false)")
        ledger.create_backfill(record("b1"), tasks(8000))
        for _ in range(60):
            ledger.claim("b1", LIVE, 100, 60)
        (one,) = ledger.claim("b1", LIVE, 1, 60)
        assert one.task.task_id == 6000
        floor = ledger._floors["b1"]
        assert floor == {"gen": 0, "fw": 60, "ft": 6000}  # the first pending it saw: its own
        (nxt,) = ledger.claim("b1", LIVE, 1, 60)
        assert nxt.task.task_id == 6001
    finally:
        ledger.close()
    from backfill.run.ledger import postgres_sql as q

    def read(plan: dict[str, Any]) -> int:  # the pages of tasks_ready both scans read
        return sum(s["Shared Hit Blocks"] for s in _scans_of(plan["Plan"], "tasks_ready"))

    with_floor = read(_claim_plan(url, ledger._floors["b1"]))
    without = read(_claim_plan(url, q.NO_FLOOR))
    assert with_floor <= 12, with_floor
    assert without >= 5 * with_floor + 20, (with_floor, without)


def test_a_version_9_ledger_migrates_to_10_and_counts_requeues_from_any_connection(
    pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backfill.run.ledger import sql as ledger_sql
    from backfill.run.ledger.records import TaskEnd

    url = pg_server.create_database()
    with monkeypatch.context() as patch:  # this code, stopped at version 9
        patch.setattr(ledger_sql, "SCHEMA_VERSION", 9)
        old = open_ledger(url)
        old.create_backfill(record("b1"), tasks(6))
        old.close()
    with psycopg.connect(url) as db:
        found = db.execute("SELECT to_regclass('backfill_ledger.requeues')").fetchone()
        assert found == (None,)
    ledger = open_ledger(url)
    other = open_ledger(url)
    try:
        with psycopg.connect(url) as db:
            version = db.execute(
                "SELECT value FROM backfill_ledger.meta WHERE key = 'schema_version'"
            ).fetchone()
        assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION == 10
        (first,) = ledger.claim("b1", LIVE, 1, 60)
        assert first.task.task_id == 0
        (theirs,) = other.claim("b1", OTHER, 1, 60)
        assert [c.task.task_id for c in ledger.claim("b1", LIVE, 1, 60)] == [2]
        end = TaskEnd.failure(0.1, "boom", 0)  # a retry due now
        assert other.finish(theirs, "b1", OTHER, end) == "pending"
        assert [c.task.task_id for c in ledger.claim("b1", LIVE, 1, 60)] == [1]
        # A connection with another search_path (an operator's reset by hand) is counted too.
        assert ledger.finish(first, "b1", LIVE, TaskEnd.failure(0.1, "boom", None)) == "failed"
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(
                "UPDATE backfill_ledger.tasks SET status = 'pending' "
                "WHERE backfill_id = 'b1' AND task_id = 0"
            )
            counts = db.execute("SELECT backfill_id, count FROM backfill_ledger.requeues")
            assert counts.fetchall() == [("b1", 2)]
        assert [c.task.task_id for c in ledger.claim("b1", LIVE, 1, 60)] == [0]
        assert [c.task.task_id for c in ledger.claim("b1", LIVE, 9, 60)] == [3, 4, 5]
    finally:
        other.close()
        ledger.close()


RETRYING_WORKER = r"""
import json, sys, time
from backfill.fingerprints import PartitionFingerprint, TaskFingerprint
from backfill.run.ledger import TaskEnd, new_worker_id, open_ledger

url, bid = sys.argv[1], sys.argv[2]
FP = TaskFingerprint(PartitionFingerprint.of(1, 1))
ledger, me, out = open_ledger(url), new_worker_id(), []
while True:
    claims = ledger.claim(bid, me, 1, 60)
    if not claims:
        if all(t.status == "done" for t in ledger.tasks(bid)):
            break
        time.sleep(0.01)
        continue
    (c,) = claims
    if c.task.task_id % 20 == 0 and c.attempt == 1:  # fails once, retried at once
        end = TaskEnd.failure(0.0, "boom", 0)
    else:
        end = TaskEnd.success(0.0, 1, 0, FP)
    out.append([c.task.task_id, c.attempt, ledger.finish(c, bid, me, end)])
print(json.dumps(out))
"""


def test_eight_processes_claiming_one_task_at_a_time_with_retries_run_each_once(
    pg_server: Any,
) -> None:
    # Claims of one from floors, while tasks keep going back to pending below them (a retry of
    # every 20th task): every task ends done by exactly one attempt, the retried ones after one
    # failed attempt, and no two attempts of a task overlap.
    url = pg_server.create_database()
    ledger = open_ledger(url)
    n = 1000
    try:
        ledger.create_backfill(record("b1"), tasks(n))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RETRYING_WORKER, url, "b1"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        ends: dict[int, list[tuple[int, str]]] = {}
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err
            for task_id, attempt, outcome in json.loads(out):
                ends.setdefault(task_id, []).append((attempt, outcome))
        retried = {i for i in range(n) if i % 20 == 0}
        assert {i: sorted(e) for i, e in ends.items()} == {
            i: [(1, "pending"), (2, "done")] if i in retried else [(1, "done")] for i in range(n)
        }
        attempts: dict[int, list[Any]] = {}
        for a in ledger.attempts("b1"):
            attempts.setdefault(a["task_id"], []).append(a)
        assert {i: [a["status"] for a in rows] for i, rows in attempts.items()} == {
            i: ["failed", "done"] if i in retried else ["done"] for i in range(n)
        }
        for rows in attempts.values():
            for before, after in itertools.pairwise(rows):
                assert before["finished_at"] <= after["started_at"]
        assert all(t.status == "done" for t in ledger.tasks("b1"))
    finally:
        ledger.close()
