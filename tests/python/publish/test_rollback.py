"""Rollback and gc on the shop (DuckDB), through the API and the CLI: bad input is refused with a
one-line error naming what to do and changes nothing; the retention decides what gc drops; a
publish or rollback that died before the ledger recorded it is recorded from the warehouse.

What every engine does (exact restore, refusals after a later publication, readers) is the
engine conformance suite's (tests/python/conformance/test_engine_rollback.py)."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import backfill
from backfill.engines import PUBLISHED
from backfill.examples import shop
from backfill.publish import collect_garbage, rollback_publication
from backfill.run.ledger import ledger_for
from shop_support import AS_OF, cli, copy_built

START, END = "2026-08-03", "2026-08-07"
MODELS = ("fct_daily_sales", "fct_monthly_sales", "fct_sales_7d")
UTC = dt.timezone.utc


def fingerprints(p: backfill.Project) -> dict[str, Any]:
    eng = backfill.engines.registry.engine_for(p)
    try:
        return {m: eng.fingerprints(p, m, PUBLISHED, []) for m in MODELS}
    finally:
        eng.close()


def publish_fix(root: Path, start: str = START, end: str = END, **kw: Any) -> Any:
    p = backfill.Project.load(root)
    plan = p.plan("fct_daily_sales+", start, end, as_of=AS_OF)
    bf = p.backfill(plan, reason="discount bug fixed", **kw)
    assert bf.run(concurrency=2, backoff=0.0).ok
    assert bf.audit().passed
    return bf.publish("revenue from 3 Aug about 2% lower")


@pytest.fixture
def fixed(built_shop: Path, tmp_path: Path) -> Path:
    root = copy_built(built_shop, tmp_path / "shop")
    shop.fix(root)
    return root


def set_keep(root: Path, keep: object) -> None:
    yml = root / "backfill.yml"
    doc = yaml.safe_load(yml.read_text())
    doc["publish"] = {"keep": keep}
    yml.write_text(yaml.safe_dump(doc))


def test_bad_ids_and_notes_are_refused_and_change_nothing(fixed: Path) -> None:
    pub = publish_fix(fixed)
    p = backfill.Project.load(fixed)
    now = fingerprints(p)
    with pytest.raises(backfill.NotFoundError, match=r"no publication 'pub_nope'.*changelog"):
        p.rollback("pub_nope", note="why")
    with pytest.raises(backfill.InvalidInputError, match="needs a note"):
        p.rollback(pub.id, note="  ")
    with pytest.raises(backfill.InvalidInputError, match="publication id ''"):
        p.rollback("", note="why")
    with pytest.raises(backfill.InvalidInputError, match="force_reason"):
        p.rollback(pub.id, note="why", force_reason=" ")
    assert fingerprints(p) == now
    rb = p.rollback(pub.id, note="wrong after all")
    with pytest.raises(backfill.ConflictError, match=f"already rolled back by {rb.id}"):
        p.rollback(pub.id, note="again")


def test_keep_zero_keeps_nothing_and_refuses_the_rollback(fixed: Path) -> None:
    set_keep(fixed, 0)
    pub = publish_fix(fixed)
    assert pub.keep_until is None and "rolled back" not in str(pub)
    p = backfill.Project.load(fixed)
    with pytest.raises(backfill.ConflictError, match=r"kept nothing .*keep: 0"):
        p.rollback(pub.id, note="why")


@pytest.mark.parametrize("keep", ["-3d", "soon", True, {"days": 3}])
def test_a_bad_keep_is_refused_naming_it(fixed: Path, keep: object) -> None:
    set_keep(fixed, keep)
    with pytest.raises(backfill.BackfillError, match="keep"):
        backfill.Project.load(fixed)


def test_gc_drops_only_expired_backups_and_a_rollback_after_says_when(fixed: Path) -> None:
    set_keep(fixed, "2d")
    first = publish_fix(fixed)
    p = backfill.Project.load(fixed)
    ledger = ledger_for(p, must_exist=True)
    engine = backfill.engines.registry.engine_for(p)
    until = dt.datetime.fromisoformat(first.keep_until)
    # before the end of the retention: nothing is dropped
    report = collect_garbage(p, ledger, engine, now=until - dt.timedelta(seconds=1))
    assert report.dropped == {} and report.kept == {first.id: first.keep_until}
    assert engine.backup_rows(first.id) == 4 + 1 + 10  # days, the month, 7-day windows
    # a dry run says what it would drop and drops nothing
    dry = collect_garbage(p, ledger, engine, now=until, dry_run=True)
    assert dry.dropped == {first.id: 15} and "would drop" in str(dry)
    assert engine.backup_rows(first.id) == 15
    report = collect_garbage(p, ledger, engine, now=until)
    assert report.dropped == {first.id: 15}
    assert engine.backup_rows(first.id) is None  # the backup schema is gone
    assert ledger.kept_version(first.id).dropped_at == until.isoformat(timespec="seconds")
    with pytest.raises(backfill.ConflictError, match=re.escape(f"kept until {first.keep_until}")):
        p.rollback(first.id, note="too late")
    # expired but not yet collected: refused the same way
    second = publish_fix(fixed, "2026-09-01", "2026-09-03")
    later = dt.datetime.fromisoformat(second.keep_until) + dt.timedelta(hours=1)
    with pytest.raises(backfill.ConflictError, match=re.escape(f"kept until {second.keep_until}")):
        rollback_publication(p, ledger, engine, second.id, "too late", now=later)


def test_a_rollback_while_a_backfill_of_the_same_partitions_runs_is_refused(fixed: Path) -> None:
    pub = publish_fix(fixed)
    p = backfill.Project.load(fixed)
    plan = p.plan("fct_daily_sales+", "2026-08-05", "2026-08-06", as_of=AS_OF)
    running = p.backfill(plan, reason="another fix", allow_overlap="testing")
    running.ledger.set_status(running.id, "running")
    with pytest.raises(backfill.ConflictError, match=f"running.*{running.id}"):
        p.rollback(pub.id, note="why")
    running.ledger.cancel(running.id, "not needed", "tester")
    p.rollback(pub.id, note="why")


def test_a_publish_that_died_before_the_ledger_knew_is_recorded_from_the_warehouse(
    fixed: Path,
) -> None:
    p = backfill.Project.load(fixed)
    plan = p.plan("fct_daily_sales+", START, END, as_of=AS_OF)
    bf = p.backfill(plan, reason="discount bug fixed")
    assert bf.run(concurrency=2, backoff=0.0).ok
    assert bf.audit().passed
    ledger: Any = bf.ledger
    real = ledger.record_publication

    def die(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt  # the process stops after the warehouse committed

    ledger.record_publication = die
    with pytest.raises(KeyboardInterrupt):
        bf.publish("revenue from 3 Aug about 2% lower")
    ledger.record_publication = real
    assert bf.status().status == "done"  # the ledger does not know yet
    published = p.changelog().publications()[0]
    # the next command that decides on publications brings the ledger level first
    with pytest.raises(backfill.InvalidInputError, match="is published"):
        bf.publish("again")
    assert bf.status().status == "published"
    kept = ledger.kept_version(published["publication_id"])
    assert kept.backfill_id == bf.id and kept.keep_until is not None
    p.rollback(published["publication_id"], note="it was wrong")


def test_the_cli_rolls_back_and_collects_garbage(fixed: Path) -> None:
    original = fingerprints(backfill.Project.load(fixed))
    pub = publish_fix(fixed)
    refused = cli("rollback", "pub_nope", "--project", str(fixed), "--note", "x")
    assert refused.returncode == 2 and "no publication 'pub_nope'" in refused.stderr
    done = cli("rollback", pub.id, "--project", str(fixed), "--note", "wrong", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["rolled_back"] is True and out["rolls_back"] == pub.id
    again = cli("rollback", pub.id, "--project", str(fixed), "--note", "wrong")
    assert again.returncode == 1 and "already rolled back" in again.stderr
    gc = cli("gc", "--project", str(fixed), "--dry-run")
    assert gc.returncode == 0 and "no expired backups" in gc.stdout
    assert fingerprints(backfill.Project.load(fixed)) == original


def test_the_airflow_call_is_safe_to_retry(fixed: Path) -> None:
    from backfill.integrations.airflow import tasks

    original = fingerprints(backfill.Project.load(fixed))
    pub = publish_fix(fixed)
    first = tasks.rollback(pub.id, "taken back by the DAG", project=fixed)
    assert first["rolls_back"] == pub.id and first["id"].startswith("rb_")
    again = tasks.rollback(pub.id, "taken back by the DAG", project=fixed)  # a retried task
    assert again["already_rolled_back"] is True and again["id"] == first["id"]
    assert fingerprints(backfill.Project.load(fixed)) == original
    with pytest.raises(backfill.NotFoundError, match="pub_nope"):
        tasks.rollback("pub_nope", "x", project=fixed)
