"""Stopping a runner with SIGINT (Ctrl-C) and SIGTERM, in real processes: ``backfill run`` in a
subprocess on a project whose tasks take as long as the test says (stop_support), the signal
sent while tasks run; then the exit code, the ledger, ``backfill status`` and a resume that
leaves every partition exactly once (DuckDB's own per-day sums as the oracle)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import backfill
from backfill.cli import main
from stop_support import (
    AS_OF,
    expected,
    make_project,
    new_backfill,
    run_cli,
    running,
    set_knob,
    wait_for,
    written,
)

DAYS = 6


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``backfill ARGS`` in this process (a subprocess costs seconds of start-up here)."""
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


def _resume_and_check(
    root: Path, bf: backfill.Backfill, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resume (tasks instant now) and check every partition is there exactly once."""
    set_knob(root, 0)
    code, out = _main(
        capsys, "run", "--resume", bf.id, "--project", str(root), "--json", "--backoff", "0"
    )
    assert code == 0 and json.loads(out)["status"] == "done", out
    assert written(root, bf.id) == expected(root)  # each day once, with DuckDB's own sums
    done = sorted(a["task_id"] for a in bf.attempts() if a["status"] == "done")
    assert done == list(range(DAYS))  # each task done by exactly one attempt


def _status_text(root: Path, bf: backfill.Backfill, capsys: pytest.CaptureFixture[str]) -> str:
    code, out = _main(capsys, "status", bf.id, "--project", str(root))
    assert code == 0, out
    return out


def test_sigint_lets_running_tasks_finish_then_exits_130_and_resume_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "p", days=DAYS, knob=12)  # ~0.4 s a task
    bf = new_backfill(root, DAYS)
    proc = run_cli(
        "run",
        "--resume",
        bf.id,
        "--project",
        str(root),
        "--json",
        "--concurrency",
        "2",
        "--grace",
        "30s",
    )
    wait_for(lambda: bf.status().done >= 1 and running(bf) >= 1, proc=proc)
    in_flight = {t.task_id for t in bf.tasks() if t.status == "running"}
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert (doc["status"], doc["held"]) == ("interrupted", "interrupted")
    assert "stopped by SIGINT (Ctrl-C)" in err and f"backfill run --resume {bf.id}" in err
    tasks = {t.task_id: t for t in bf.tasks()}
    # The grace period let the running tasks finish: done, none interrupted, leases released.
    assert all(tasks[i].status == "done" for i in in_flight), in_flight
    assert not any("interrupted" in (a["error"] or "") for a in bf.attempts())
    assert 0 < bf.status().done < DAYS and not bf.ledger.live_workers(bf.id)
    assert bf.ledger.backfill(bf.id)["status"] == "interrupted"
    text = _status_text(root, bf, capsys)
    assert "[interrupted]" in text and f"backfill run --resume {bf.id}" in text
    _resume_and_check(root, bf, capsys)


def test_sigterm_interrupts_tasks_after_the_grace_period_exits_143_nothing_half_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "p", days=DAYS, knob=2000)  # a minute a task, uninterrupted
    bf = new_backfill(root, DAYS)
    proc = run_cli(
        "run",
        "--resume",
        bf.id,
        "--project",
        str(root),
        "--json",
        "--concurrency",
        "2",
        "--grace",
        "0.5s",
    )
    wait_for(lambda: running(bf) == 2, proc=proc)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert time.monotonic() - sent < 20  # interrupted, not run to the end
    assert "the grace period of 0.5 s is over" in err
    assert json.loads(out)["status"] == "interrupted"
    interrupted = [a for a in bf.attempts() if a["status"] == "failed"]
    assert len(interrupted) == 2 and all(
        a["error"].startswith("interrupted by SIGTERM") for a in interrupted
    )
    assert {t.status for t in bf.tasks()} == {"pending"}  # leases released, nothing done
    assert not bf.ledger.live_workers(bf.id)
    assert written(root, bf.id) == []  # the interrupted transactions committed nothing
    assert "[interrupted]" in _status_text(root, bf, capsys)
    _resume_and_check(root, bf, capsys)


def test_a_second_ctrl_c_aborts_at_once_and_loses_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "p", days=DAYS, knob=2000)
    bf = new_backfill(root, DAYS)
    proc = run_cli(
        "run",
        "--resume",
        bf.id,
        "--project",
        str(root),
        "--json",
        "--concurrency",
        "2",
        "--grace",
        "10m",
    )
    wait_for(lambda: running(bf) == 2, proc=proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None  # the first Ctrl-C waits for the running tasks (10 min grace)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 20 and "asked again: aborting at once" in err
    assert (
        sorted(a["error"].split(":")[0] for a in bf.attempts())
        == ["interrupted by SIGINT (Ctrl-C)"] * 2
    )
    assert written(root, bf.id) == [] and bf.ledger.backfill(bf.id)["status"] == "interrupted"
    _resume_and_check(root, bf, capsys)


def test_airflow_run_task_on_sigterm_interrupts_and_releases_its_task(tmp_path: Path) -> None:
    # Airflow kills a task with SIGTERM (SIGKILL a few seconds later): the task must end at
    # once, its attempt recorded, its task claimable again without waiting for the lease.
    root = make_project(tmp_path / "p", days=1, knob=2000)
    bf = new_backfill(root, 1)
    code = (
        "from backfill.integrations.airflow.tasks import run_task; "
        f"run_task({bf.id!r}, 0, project={str(root)!r}, lease_seconds=600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(lambda: running(bf) == 1, proc=proc)
    time.sleep(0.5)  # the claim is made just before the task starts (and its handler)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "TaskFailure" in err and "interrupted by SIGTERM" in err
    (task,) = bf.tasks()
    assert task.status == "pending" and not bf.ledger.live_workers(bf.id)
    set_knob(root, 0)  # Airflow's retry runs it
    from backfill.integrations.airflow.tasks import run_task

    assert run_task(bf.id, 0, project=root)["status"] == "done"
    assert written(root, bf.id) == expected(root)


def test_grace_is_checked_before_anything_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "p", days=1)
    code = main(
        [
            "run",
            "--project",
            str(root),
            "--select",
            "daily",
            "--start",
            "2026-01-01",
            "--end",
            "2026-01-02",
            "--as-of",
            AS_OF,
            "--reason",
            "r",
            "--grace",
            "soon",
        ]
    )
    assert code == 2 and "--grace 'soon' is not a duration" in capsys.readouterr().err
    assert not (root / ".backfill" / "ledger.sqlite").exists()


def test_the_postgres_engine_interrupts_a_running_task_which_commits_nothing(
    tmp_path: Path, pg_server: object
) -> None:
    import datetime as dt
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    from backfill.engines import Area, TaskFailure
    from backfill.engines.registry import engine_for

    url = pg_server.create_database("stop")  # type: ignore[attr-defined]
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "CREATE SCHEMA raw; CREATE TABLE raw.events AS SELECT TIMESTAMPTZ "
            "'2026-01-01 00:00+00' + i * interval '1 hour' AS ts, i % 13 AS v "
            "FROM generate_series(0, 23) i"
        )
    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "backfill.yml").write_text(
        f"name: slow\nengine: {{type: postgres, url: '{url}'}}\nsources:\n  raw:\n"
        "    events: {grain: day, tz: UTC, event_time: ts}\nmodels:\n"
        "  defaults: {grain: day, tz: UTC, begin: '2026-01-01', strategy: replace}\n"
        "  daily: {}\n"
    )
    (root / "models" / "daily.sql").write_text(
        '{{ config(event_time="day") }}\nselect cast(ts as date) as day, sum(v) as total\n'
        'from {{ source("raw", "events") }} where ts >= {{ start }} and ts < {{ end }}\n'
        "and (select 1 from pg_sleep(60)) = 1 group by 1\n"
    )
    project = backfill.Project.load(root)
    engine = engine_for(project)
    assert engine.capabilities.interrupt
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    area = Area("bf_interrupted", {"daily": [(start, start + dt.timedelta(days=1))]})
    try:
        with ThreadPoolExecutor(1) as pool, psycopg.connect(url, autocommit=True) as db:
            task = pool.submit(
                engine.run_task, project, "daily", start, start + dt.timedelta(days=1), area
            )
            wait_for(
                lambda: (
                    db.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE query "
                        "LIKE '%pg_sleep(60)%' AND state = 'active' AND "
                        "pid <> pg_backend_pid()"
                    ).fetchone()
                    == (1,)
                )
            )
            sent = time.monotonic()
            engine.interrupt()
            with pytest.raises(TaskFailure, match="canceling statement due to user request"):
                task.result(timeout=30)
            assert time.monotonic() - sent < 10
            assert db.execute(
                "SELECT count(*) FROM pg_tables WHERE tablename = 'daily'"
            ).fetchone() == (0,)  # rolled back: nothing was created
    finally:
        engine.close()
