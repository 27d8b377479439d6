"""Faults around a run, each made real: a full disk (a small tmpfs, filled), the warehouse
locked by another process past the retry budget, a ledger on a read-only file system, a ledger
written by a newer backfill. Each must fail with an error naming the problem and what to do,
and once it is fixed a resume leaves every partition exactly once (DuckDB's own sums as the
oracle). The mounts need root (the test suite runs as root here); without it those tests skip
and say so."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import backfill
from backfill.cli import main
from backfill.run.ledger import SCHEMA_VERSION
from stop_support import expected, make_project, new_backfill, written

DAYS = 3


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "8m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the block."""
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"mounting a tmpfs is not permitted here ({mounted.stderr.strip()}); this "
            "fault needs a real small file system (run the suite as root)"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``backfill ARGS`` in this process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def resume_gives_every_partition_once(
    root: Path, bf: backfill.Backfill, capsys: pytest.CaptureFixture[str], *extra: str
) -> None:
    code, out, err = run(
        capsys, "run", "--resume", bf.id, "--project", str(root), "--json", "--backoff", "0", *extra
    )
    assert code == 0, err
    assert json.loads(out)["status"] == "done"
    assert written(root, bf.id) == expected(root)
    done = sorted(a["task_id"] for a in bf.attempts() if a["status"] == "done")
    assert done == list(range(DAYS))


def test_a_full_disk_fails_each_write_clearly_and_resume_completes_once_freed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"  # the ledger on a disk with room
    with tmpfs(tmp_path / "disk") as disk:
        root = make_project(disk / "p", days=DAYS)
        bf = new_backfill(root, DAYS, ledger=ledger)
        filler = disk / "filler"
        with filler.open("wb") as f, contextlib.suppress(OSError):  # ENOSPC ends it
            while True:
                f.write(b"\0" * (1 << 16))
        code, out, err = run(
            capsys,
            "run",
            "--resume",
            bf.id,
            "--project",
            str(root),
            "--ledger",
            ledger,
            "--json",
            "--backoff",
            "0",
        )
        assert code == 1
        failed = json.loads(out)["failed_tasks"]
        assert len(failed) == DAYS  # each failed once: retrying cannot free space
        for task in failed:
            assert task["attempts"] == 1
            assert (
                f"the disk holding {root / 'warehouse.duckdb'} is full (No space left on "
                "device)" in task["error"]
            )
            assert "nothing of this task was committed. Free space" in task["error"]
        assert f"backfill run --resume {bf.id}" in err
        filler.unlink()  # the fix: free space
        resume_gives_every_partition_once(root, bf, capsys, "--ledger", ledger)


def test_a_warehouse_locked_past_the_retry_budget_fails_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "p", days=DAYS, engine="lock_timeout: 0.5")
    bf = new_backfill(root, DAYS)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; "
            f"c = duckdb.connect({str(root / 'warehouse.duckdb')!r}); print('held', flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        code, out, _err = run(
            capsys,
            "run",
            "--resume",
            bf.id,
            "--project",
            str(root),
            "--json",
            "--backoff",
            "0",
            "--max-attempts",
            "2",
            "--concurrency",
            "1",
        )
    finally:
        holder.communicate("")  # the other process lets go (its stdin closes)
    assert code == 1
    failed = json.loads(out)["failed_tasks"]
    assert [t["attempts"] for t in failed] == [2] * DAYS  # retried, then gave up
    for task in failed:
        assert "stayed locked by another process for 0.5 s (engine lock_timeout)" in task["error"]
        assert "Close the other process" in task["error"] and "lock_timeout" in task["error"]
        assert f"PID {holder.pid}" in task["error"]  # DuckDB names the holder
    assert written(root, bf.id) == []
    resume_gives_every_partition_once(root, bf, capsys)


def test_a_read_only_ledger_is_refused_clearly_and_nothing_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "p", days=DAYS)
    with tmpfs(tmp_path / "state") as state:
        ledger = f"sqlite:///{state / 'ledger.sqlite'}"
        bf = new_backfill(root, DAYS, ledger=ledger)
        bf.ledger.close()
        remount(state, "ro")
        before = (state / "ledger.sqlite").read_bytes()
        for command in (["run", "--resume", bf.id], ["status", bf.id]):
            code, _, err = run(capsys, *command, "--project", str(root), "--ledger", ledger)
            assert code == 2, err
            assert (
                f"ledger {state / 'ledger.sqlite'}: opening failed: it is on a read-only "
                f"file system ({state})" in err
            )
            assert "must be writable" in err and "nothing was changed" in err
        assert (state / "ledger.sqlite").read_bytes() == before
        assert written(root, bf.id) == []
        remount(state, "rw")  # the fix
        resume_gives_every_partition_once(root, bf, capsys, "--ledger", ledger)


def _set_version(path: Path, version: int) -> None:
    # Test-side only: stands in for a newer backfill having written the file (and, set back,
    # for running that newer backfill).
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    db.close()


def test_a_ledger_of_a_newer_backfill_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "p", days=DAYS)
    bf = new_backfill(root, DAYS)
    bf.ledger.close()
    path = root / ".backfill" / "ledger.sqlite"
    _set_version(path, SCHEMA_VERSION + 1)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    for command in (["run", "--resume", bf.id], ["status", bf.id], ["status", "--list"]):
        code, _, err = run(capsys, *command, "--project", str(root))
        assert code == 2, err
        assert (
            f"schema version {SCHEMA_VERSION + 1}, newer than the version {SCHEMA_VERSION} "
            "this backfill supports" in err
        )
        assert "Upgrade backfill (pip install -U backfill)" in err
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # never touched
    assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.sqlite"]
    assert written(root, bf.id) == []
    _set_version(path, SCHEMA_VERSION)  # the fix: the backfill that knows this version
    resume_gives_every_partition_once(root, bf, capsys)
