"""Running a backfill DAG under Apache Airflow in a subprocess (``dag.test()`` on a SQLite
metadata database, or on a Postgres one: ``db=URL``), so that Airflow's global logging and
settings never touch the test process.

The DAG file below is what a user writes (``backfill_dag(...)``); run as a script it executes
``dag.test()`` for each requested run and writes what Airflow recorded as JSON. A fixed
``logical_date``/``run_after`` gives the same run id each time, so a second ``dag.test()`` is a
re-run (clear) of the same DAG run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DAG_FILE = '''
import datetime as dt
import json
from pathlib import Path

from backfill.integrations.airflow import backfill_dag

CONF = json.loads(Path(__file__).with_suffix(".json").read_text())

dag = backfill_dag(CONF["dag_id"], CONF["project"], CONF["select"], CONF["start"], CONF["end"],
                   concurrency=2, reason="discount bug fixed", note=CONF.get("note"),
                   as_of=CONF["as_of"], gates=CONF.get("gates"),
                   approval=CONF.get("approval", False), retries=1, retry_delay=dt.timedelta(0),
                   ledger=CONF.get("ledger"),
                   paused_recheck=dt.timedelta(seconds=CONF.get("recheck", 60)))


def _backfill_cli(*args):
    """``backfill ARGS`` in a second process, as an operator would run it: the installed
    console script, beside this interpreter."""
    import subprocess
    import sys

    script = Path(sys.executable).parent / "backfill"
    r = subprocess.run([str(script), *args, "--project", CONF["project"]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    print(r.stdout, flush=True)


def _control(action):
    """Right after the plan task records the backfill, an operator pauses or cancels it."""
    from backfill.integrations.airflow import tasks

    real = tasks.plan_backfill
    if getattr(real, "holds", False):  # the file runs twice (as __main__, then parsed by Airflow)
        return

    def plan_then_hold(*args, **kwargs):
        bid = real(*args, **kwargs)
        _backfill_cli(*action, bid)
        if CONF.get("on_reschedule"):
            _when_rescheduled(CONF["on_reschedule"], bid)
        return bid

    plan_then_hold.holds = True
    tasks.plan_backfill = plan_then_hold


def _when_rescheduled(action, bid):
    """Once a mapped task waits in up_for_reschedule, the operator runs ``backfill ACTION`` (resume
    or cancel). (Started from the plan task: by then dag.test has imported Airflow's models,
    which a thread importing them at the same time could deadlock on.)"""
    import threading
    import time

    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    def watch():
        while True:
            time.sleep(0.3)
            with create_session() as session:
                waiting = session.query(TaskInstance).filter_by(
                    dag_id=dag.dag_id, state=TaskInstanceState.UP_FOR_RESCHEDULE).count()
            if waiting:
                _backfill_cli(*action, bid)
                return

    threading.Thread(target=watch, daemon=True).start()


def _inject(fail):
    """The task of (model, start) fails ``times`` times AFTER writing its partition: a retry
    must rewrite it, not add to it."""
    from backfill.engines import TaskFailure
    from backfill.engines.duckdb import DuckDBEngine

    real = DuckDBEngine.run_task
    marker = Path(fail["marker"])

    def flaky(self, project, model, start, end, area):
        result = real(self, project, model, start, end, area)
        day = start.date().isoformat() if start is not None else None
        if model == fail["model"] and day == fail["start"]:
            done = int(marker.read_text()) if marker.exists() else 0
            if done < fail["times"]:
                marker.write_text(str(done + 1))
                raise TaskFailure(f"injected failure #{done + 1}: connection reset",
                                  transient=fail["transient"])
        return result

    DuckDBEngine.run_task = flaky


def _respond(choice):
    """A reviewer answers the approval through the HITL REST endpoint's own code (as the
    Required Actions UI does), once the task waits for input."""
    import threading
    import time
    from types import SimpleNamespace

    from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    reviewer = SimpleNamespace(get_id=lambda: "ana", get_name=lambda: "Ana")

    def answer():
        while True:
            time.sleep(0.3)
            with create_session() as session:
                ti = session.query(TaskInstance).filter_by(
                    dag_id=dag.dag_id, task_id="approve",
                    state=TaskInstanceState.AWAITING_INPUT).one_or_none()
                if ti is not None:
                    update_hitl_detail(dag.dag_id, ti.run_id, "approve",
                                       UpdateHITLDetailPayload(chosen_options=[choice]),
                                       reviewer, session)
                    return

    threading.Thread(target=answer, daemon=True).start()


# Module level: with an executor, tasks run in worker processes that import this file.
if CONF.get("fail"):
    _inject(CONF["fail"])
if CONF.get("control"):
    _control(CONF["control"])


if __name__ == "__main__":
    from airflow.models.dagrun import DagRun
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session

    if CONF.get("respond"):
        _respond(CONF["respond"])
    when = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    runs = []
    for _ in range(CONF.get("runs", 1)):
        dr = dag.test(logical_date=when, run_after=when,
                      use_executor=CONF.get("executor", False))
        with create_session() as session:
            run = session.query(DagRun).filter_by(dag_id=dag.dag_id, run_id=dr.run_id).one()
            tis = [{"task_id": ti.task_id, "map_index": ti.map_index, "state": str(ti.state),
                    "try_number": ti.try_number, "label": ti.rendered_map_index,
                    "reschedules": session.query(TaskReschedule).filter_by(ti_id=ti.id).count()}
                   for ti in run.get_task_instances(session=session)]
            hitl = [{"chosen": d.chosen_options, "by": d.responded_by_user_name}
                    for ti in run.get_task_instances(session=session) if ti.task_id == "approve"
                    for d in session.query(HITLDetail).filter_by(ti_id=ti.id)]
            runs.append({"run_id": run.run_id, "state": str(run.state), "hitl": hitl,
                         "tis": sorted(tis, key=lambda t: (t["task_id"], t["map_index"]))})
    Path(CONF["out"]).write_text(json.dumps(runs))
'''


def _sessions(db: str | None) -> str:
    """What each session of the Postgres server of ``db`` runs and waits for."""
    if db is None:
        return ""
    import psycopg

    try:
        with psycopg.connect(db, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT pid, datname, state, wait_event_type, wait_event, pg_blocking_pids(pid),"
                " now() - xact_start, left(query, 200) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchall()
    except psycopg.Error as err:
        return f"--- pg_stat_activity unavailable: {err}"
    return "--- pg_stat_activity\n" + "\n".join(map(str, rows))


def _stuck(timeout: float, output: str, sessions: str, home: Path) -> str:
    """What a DAG run that did not finish was doing: the tail of its output, of its task logs
    and of the API server's, and what each Postgres session waited for."""
    parts = [f"the DAG run did not finish in {timeout} s", output[-4000:], sessions]
    for log in sorted(home.rglob("*.log"), key=lambda f: f.stat().st_mtime)[-6:]:
        text = log.read_text(errors="replace")[-1500:]
        parts.append(f"--- {log.relative_to(home)}\n{text}")
    return "\n".join(parts)


@contextlib.contextmanager
def api_server(home: Path, dags: Path, db: str | None = None) -> Iterator[dict[str, str]]:
    """An Airflow API server on a free port for worker processes (their Execution API); yields
    the environment that points workers at it. Stopped (by its pid) on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    environ = {
        **env(home, dags, db),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__PARALLELISM": "2",
    }
    log = (home / "api-server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port", str(port)],
        env=environ,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (home / "api-server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2
                ) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the Airflow API server did not start in 120 s"
            time.sleep(0.5)
        yield environ
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            server.kill()
            server.wait()
        log.close()


def migrate(home: Path, db: str | None = None) -> None:
    """An Airflow home with a migrated metadata database (SQLite in ``home``, or the Postgres
    database at ``db``)."""
    home.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=env(home, home / "dags", db),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def env(home: Path, dags: Path, db: str | None = None) -> dict[str, str]:
    """Airflow's environment; its metadata database is SQLite in ``home``, or the Postgres
    database at ``db`` (postgresql://...) through psycopg 3, sync and async (Airflow 3 wants
    both; asyncpg, its default async driver, is not installed) with the LocalExecutor."""
    environ = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
    }
    if db is not None:
        rest = db.split("://", 1)[1]
        environ.update(
            {
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg://{rest}",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": f"postgresql+psycopg_async://{rest}",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            }
        )
    return environ


def run_dag(
    template_home: Path,
    work: Path,
    conf: dict[str, Any],
    timeout: float = 300,
    db: str | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Writes the DAG file with ``conf`` into ``work/dags`` and runs it against a copy of the
    migrated metadata database; returns (the runs Airflow recorded, the process output).
    ``conf["executor"]``: tasks run in LocalExecutor worker processes (through an API server)
    instead of in the test process; their logs are under ``work/airflow/logs``. ``db``: the
    migrated Postgres metadata database to run on (``template_home`` is then unused)."""
    home, dags = work / "airflow", work / "dags"
    home.mkdir(parents=True)
    if db is None:  # airflow.cfg: written anew
        shutil.copy2(template_home / "airflow.db", home / "airflow.db")
    dags.mkdir()
    out = work / "runs.json"
    (dags / "backfill_fix.json").write_text(json.dumps({**conf, "out": str(out)}))
    (dags / "backfill_fix.py").write_text(DAG_FILE)
    with contextlib.ExitStack() as stack:
        environ = (
            stack.enter_context(api_server(home, dags, db))
            if conf.get("executor")
            else env(home, dags, db)
        )
        proc = subprocess.Popen(
            [sys.executable, str(dags / "backfill_fix.py")],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=work,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            sessions = _sessions(db)  # before the kill ends them
            proc.kill()
            output, _ = proc.communicate()
            raise AssertionError(_stuck(timeout, output, sessions, home)) from None
    assert proc.returncode == 0 and out.exists(), output[-5000:]
    runs: list[dict[str, Any]] = json.loads(out.read_text())
    return runs, output
