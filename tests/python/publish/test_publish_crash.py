"""kill -9 during publish and during rollback, in real processes, on DuckDB and PostgreSQL:
afterwards the warehouse holds exactly the old version or exactly the new one (every model's
fingerprint), and once the next command has brought the ledger level (reconcile), the ledger
agrees with the warehouse: published with its kept version when the new version is there, not
published otherwise; rolled back exactly when the old version is back.

Each trial copies a prepared project (an audited backfill, or a published one), starts the
publish (or rollback) in a new interpreter, waits until it is about to call it, and kills it
with SIGKILL after a random delay spread over twice the time the call takes to commit in the
warehouse (measured in a reference run that is not killed).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import backfill
from backfill.engines import PUBLISHED
from backfill.engines.registry import engine_for
from backfill.examples import shop
from backfill.publish.reconcile import reconcile
from backfill.run.ledger import ledger_for
from shop_support import AS_OF, copy_built

TRIALS = 20
MODELS = ("fct_daily_sales", "fct_monthly_sales", "fct_sales_7d")
CHILD = """
import sys, time, backfill
root, what, ident = sys.argv[1], sys.argv[2], sys.argv[3]
project = backfill.Project.load(root)
engine = backfill.engines.registry.engine_for(project)
swap = type(engine).publish
began = [0.0]

def publish(self, *args, **kwargs):  # reports when the warehouse committed the swap
    result = swap(self, *args, **kwargs)
    if args[1].models:
        print(f"committed {time.monotonic() - began[0]:.6f}", flush=True)
    return result

type(engine).publish = publish
if what == "publish":
    bf = backfill.Backfill.open(ident, project=project, engine=engine)
print("ready", flush=True)
began[0] = time.monotonic()
if what == "publish":
    bf.publish("revenue from 3 Aug about 2% lower")
else:
    project.rollback(ident, note="taken back", engine=engine)
print("finished", flush=True)
"""


@dataclass
class Prepared:
    """A project ready for the call (``ident``: the backfill to publish or the publication to
    roll back), how to copy it for a trial, and the two versions a trial may end with."""

    root: Path
    ident: str
    copy: Callable[[Path], Path]
    old: dict[str, Any]
    new: dict[str, Any]


def fingerprints(root: Path) -> dict[str, Any]:
    p = backfill.Project.load(root)
    engine = engine_for(p)
    try:
        return {m: engine.fingerprints(p, m, PUBLISHED, []) for m in MODELS}
    finally:
        engine.close()


def audited(root: Path) -> str:
    """Fixes the shop at ``root`` and runs and audits the fix; returns the backfill id."""
    shop.fix(root)
    p = backfill.Project.load(root)
    bf = p.backfill(
        p.plan("fct_daily_sales+", "2026-08-03", "2026-08-07", as_of=AS_OF), reason="fix"
    )
    assert bf.run(concurrency=2, backoff=0.0).ok
    assert bf.audit().passed
    bf.engine.close()
    return bf.id


def child(root: Path, what: str, ident: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), what, ident],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"{line!r} {proc.stderr.read() if proc.stderr else ''}"
    return proc


def timed(root: Path, what: str, ident: str) -> float:
    """Seconds from 'ready' to the warehouse's commit of the swap, in a run not killed."""
    proc = child(root, what, ident)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "finished" in out, err
    committed = [line for line in out.splitlines() if line.startswith("committed ")]
    assert committed, out
    return float(committed[0].split()[1])


def trials(prepared: Prepared, what: str, tmp: Path, seconds: float) -> list[str]:
    """Runs the kill trials, each killed after a delay spread over twice the time to the
    commit (half before it, half after); returns each one's outcome ("old" or "new")."""
    rng = random.Random(29)
    outcomes = []
    for i in range(TRIALS):
        root = prepared.copy(tmp / f"trial{i}")
        proc = child(root, what, prepared.ident)
        time.sleep(rng.uniform(0.0, 2.0 * seconds))
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)  # reaps it and closes its pipes
        now = fingerprints(root)
        assert now in (prepared.old, prepared.new), f"trial {i}: a half-published warehouse"
        outcomes.append("new" if now == prepared.new else "old")
        check_ledger(root, what, prepared.ident, outcomes[-1])
    return outcomes


def check_ledger(root: Path, what: str, ident: str, outcome: str) -> None:
    p = backfill.Project.load(root)
    ledger = ledger_for(p, must_exist=True)
    engine = engine_for(p)
    try:
        reconcile(p, ledger, engine)  # what the next publish, rollback or gc does first
        if what == "publish":
            status = ledger.backfill(ident).status.value
            kept = ledger.kept_versions(ident)
            if outcome == "new":
                assert status == "published" and len(kept) == 1 and kept[0].keep_until
            else:
                assert status == "done" and kept == []
        else:
            rolled = ledger.kept_version(ident).rolled_back_by
            assert (rolled is not None) == (outcome == "new"), (outcome, rolled)
    finally:
        engine.close()
        ledger.close()


@pytest.fixture
def duckdb_audited(built_shop: Path, tmp_path: Path) -> Iterator[Prepared]:
    root = copy_built(built_shop, tmp_path / "prepared")
    old = fingerprints(root)
    ident = audited(root)

    def copy(dest: Path) -> Path:
        shutil.copytree(root, dest)
        return dest

    yield Prepared(root, ident, copy, old, {})


def _new_version(prepared: Prepared, what: str, tmp: Path) -> float:
    reference = prepared.copy(tmp / "reference")
    seconds = timed(reference, what, prepared.ident)
    prepared.new = fingerprints(reference)
    assert prepared.new != prepared.old
    return seconds


def test_kill_9_during_publish_on_duckdb(duckdb_audited: Prepared, tmp_path: Path) -> None:
    seconds = _new_version(duckdb_audited, "publish", tmp_path)
    outcomes = trials(duckdb_audited, "publish", tmp_path, seconds)
    assert set(outcomes) == {"old", "new"}, outcomes  # kills landed on both sides


def test_kill_9_during_rollback_on_duckdb(duckdb_audited: Prepared, tmp_path: Path) -> None:
    pub = backfill.Backfill.open(
        duckdb_audited.ident, project=backfill.Project.load(duckdb_audited.root)
    ).publish("the fix")
    published = Prepared(
        duckdb_audited.root, pub.id, duckdb_audited.copy, fingerprints(duckdb_audited.root), {}
    )
    seconds = _new_version(published, "rollback", tmp_path)
    assert published.new == duckdb_audited.old  # a rollback brings back the old version
    outcomes = trials(published, "rollback", tmp_path, seconds)
    assert set(outcomes) == {"old", "new"}, outcomes


@pytest.fixture
def postgres_audited(built_pg_shop: Any, tmp_path: Path) -> Iterator[Prepared]:
    import psycopg

    root, url = built_pg_shop.copy(tmp_path / "prepared")
    old = fingerprints(root)
    ident = audited(root)
    template = url.rsplit("/", 1)[1]

    def copy(dest: Path) -> Path:
        # The prepared database (audit area and all) as a template; the ledger (SQLite, in the
        # project) copied with the files.
        name = f"trial_{os.urandom(5).hex()}"
        with psycopg.connect(built_pg_shop.server.url(), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "datname = %s AND pid <> pg_backend_pid()",
                [template],
            )
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        shutil.copytree(root, dest)
        yml = dest / "backfill.yml"
        yml.write_text(yml.read_text().replace(url, built_pg_shop.server.url(name)))
        return dest

    yield Prepared(root, ident, copy, old, {})


def test_kill_9_during_publish_on_postgres(postgres_audited: Prepared, tmp_path: Path) -> None:
    seconds = _new_version(postgres_audited, "publish", tmp_path)
    outcomes = trials(postgres_audited, "publish", tmp_path, seconds)
    assert set(outcomes) == {"old", "new"}, outcomes


def test_kill_9_during_rollback_on_postgres(postgres_audited: Prepared, tmp_path: Path) -> None:
    pub = backfill.Backfill.open(
        postgres_audited.ident, project=backfill.Project.load(postgres_audited.root)
    ).publish("the fix")
    published = Prepared(
        postgres_audited.root,
        pub.id,
        postgres_audited.copy,
        fingerprints(postgres_audited.root),
        {},
    )
    seconds = _new_version(published, "rollback", tmp_path)
    assert published.new == postgres_audited.old
    outcomes = trials(published, "rollback", tmp_path, seconds)
    assert set(outcomes) == {"old", "new"}, outcomes
