"""Publish on Spark by snapshot ids: the audit records the snapshots of ``main`` and of the
backfill's branch whose fingerprints it holds, and publish re-reads a side only when its
snapshot moved since. An outside write to either side moves its snapshot, so the scans run
again and find it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import backfill
from backfill.engines import PUBLISHED
from backfill.engines.sql import version_order

pytest.importorskip("pyspark")

AS_OF = "2026-12-01"
START, END = "2026-08-03", "2026-08-08"
MODELS = ("fct_daily_sales", "fct_sales_7d", "fct_monthly_sales")


@pytest.fixture
def shop_on_spark(built_spark_shop: Path, tmp_path: Path) -> Iterator[backfill.Project]:
    import spark_support
    from backfill.examples import shop

    root = spark_support.copy_built(built_spark_shop, tmp_path / "spark_shop")
    shop.fix(root)
    project = backfill.Project.load(root)
    yield project
    backfill.engines.registry.engine_for(project).close()


def _backfill(project: backfill.Project) -> backfill.Backfill:
    plan = project.plan("fct_daily_sales+", START, END, as_of=AS_OF)
    bf = project.backfill(plan, reason="discount bug fixed")
    assert bf.run(concurrency=2, backoff=0.0).ok
    return bf


def _versions(bf: backfill.Backfill) -> dict[str, dict[str, str]]:
    rows = bf.ledger.audits(bf.id)
    latest = rows[-1].audit_id
    return {r.model: r.versions for r in rows if r.audit_id == latest}


class _Scans:
    """The fingerprint queries (row hashes summed) the engine runs while counting."""

    def __init__(self, engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sql: list[str] = []
        self.counting = False
        rows = engine._rows

        def counted(cur: Any, sql: str) -> list[tuple[Any, ...]]:
            if self.counting and "xxhash64" in sql:
                self.sql.append(sql)
            return rows(cur, sql)  # type: ignore[no-any-return]

        monkeypatch.setattr(engine, "_rows", counted)


def _sql(engine: Any, sql: str) -> None:
    engine.spark.sql(sql)


def _calls(monkeypatch: pytest.MonkeyPatch, engine: Any, method: str) -> list[str]:
    """The first argument of each call of ``engine``'s one-argument ``method`` from now on (the
    call goes on as before)."""
    seen: list[str] = []
    real = getattr(engine, method)

    def recorded(arg: str) -> Any:
        seen.append(arg)
        return real(arg)

    monkeypatch.setattr(engine, method, recorded)
    return seen


def test_the_audit_records_the_snapshots_it_read_and_publish_reads_no_rows_again(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    bf = _backfill(shop_on_spark)
    engine: Any = bf.engine
    assert bf.audit().passed
    versions = _versions(bf)
    for model in MODELS:
        table = engine.table(model)
        # main's and the branch's snapshots; the branch's fingerprints are the run's (its tasks'
        # commits are all the branch holds since it was made)
        assert versions[model] == {
            "published": str(engine.snapshot_of(table)),
            "area": str(engine.snapshot_of(table, engine.branch(bf.id))),
        }
    scans = _Scans(engine, monkeypatch)
    scans.counting = True
    bf.publish("revenue from 3 Aug about 2% lower")
    assert scans.sql == []  # neither side moved: nothing to re-read
    assert bf.status().status == "published"
    fixed = engine.fingerprints(bf.project, "fct_daily_sales", PUBLISHED, [])
    assert fixed.popitem()[1].rows == 62  # July and August, one row a day


def test_an_outside_write_to_main_between_audit_and_publish_is_found(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    bf = _backfill(shop_on_spark)
    engine: Any = bf.engine
    assert bf.audit().passed
    daily = engine.table("fct_daily_sales")
    before = engine.snapshot_of(daily)
    _sql(engine, f"UPDATE {daily} SET revenue = revenue + 1 WHERE sales_date = DATE '2026-08-04'")
    assert engine.snapshot_of(daily) != before
    scans = _Scans(engine, monkeypatch)
    scans.counting = True
    with pytest.raises(backfill.ConflictError, match="fct_daily_sales changed since the audit"):
        bf.publish("ours")
    assert scans.sql  # main moved: its fingerprints were read again
    assert bf.status().status == "done"
    # nothing was published: main still holds the outside write, not the backfill's rows
    rows = engine.spark.sql(
        f"SELECT count(*) FROM {daily} WHERE sales_date = DATE '2026-08-04'"
    ).collect()
    assert rows[0][0] == 1 and engine.snapshot_of(daily) != before
    # re-audited, it publishes (the audit now records main's new snapshot)
    assert bf.audit().passed
    assert _versions(bf)["fct_daily_sales"]["published"] == str(engine.snapshot_of(daily))
    bf.publish("ours, re-audited")
    assert bf.status().status == "published"


def test_a_write_to_main_outside_the_backfilled_days_moves_the_snapshot_but_is_no_conflict(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    bf = _backfill(shop_on_spark)
    engine: Any = bf.engine
    assert bf.audit().passed
    daily = engine.table("fct_daily_sales")
    _sql(engine, f"UPDATE {daily} SET revenue = revenue + 1 WHERE sales_date = DATE '2026-07-10'")
    scans = _Scans(engine, monkeypatch)
    scans.counting = True
    bf.publish("ours")  # the scan finds the backfilled days as audited
    assert any(daily.replace("`", "") in s.replace("`", "") for s in scans.sql)
    assert bf.status().status == "published"
    kept = engine.spark.sql(
        f"SELECT count(*) FROM {daily} WHERE sales_date = DATE '2026-07-10'"
    ).collect()
    assert kept[0][0] == 1


def test_an_outside_write_to_the_branch_after_the_audit_is_found(
    shop_on_spark: backfill.Project,
) -> None:
    bf = _backfill(shop_on_spark)
    engine: Any = bf.engine
    assert bf.audit().passed
    branch = engine._on_branch(engine.table("fct_daily_sales"), engine.branch(bf.id))
    _sql(engine, f"UPDATE {branch} SET revenue = 0 WHERE sales_date = DATE '2026-08-05'")
    with pytest.raises(backfill.ConflictError, match="audit area of fct_daily_sales changed"):
        bf.publish("ours")
    assert bf.status().status == "done"


def test_an_outside_write_to_the_branch_before_the_audit_keeps_the_area_check(
    shop_on_spark: backfill.Project,
) -> None:
    """The audit takes the branch's fingerprints from the run's tasks; a commit the tasks did
    not make sits on the branch, so the audit records no branch snapshot and publish scans the
    branch against the run's fingerprints: the outside write is found."""
    bf = _backfill(shop_on_spark)
    engine: Any = bf.engine
    branch = engine._on_branch(engine.table("fct_daily_sales"), engine.branch(bf.id))
    _sql(engine, f"UPDATE {branch} SET revenue = 0 WHERE sales_date = DATE '2026-08-05'")
    bf.audit()
    versions = _versions(bf)
    assert "area" not in versions["fct_daily_sales"]
    assert "area" in versions["fct_sales_7d"]  # its branch holds its tasks' commits only
    with pytest.raises(backfill.ConflictError, match="audit area of fct_daily_sales changed"):
        bf.publish("ours", force_reason="past the gate the outside write fails")
    assert bf.status().status == "done"


def test_a_published_backfill_then_an_outside_write_then_the_next_audit_sees_it(
    shop_on_spark: backfill.Project,
) -> None:
    """Between a publish and the next audit: the next backfill's audit reads main at the
    snapshot it pins (the outside write's), and its diff shows the write."""
    first = _backfill(shop_on_spark)
    engine: Any = first.engine
    first.audit()
    first.publish("ours")
    daily = engine.table("fct_daily_sales")
    _sql(engine, f"UPDATE {daily} SET revenue = revenue + 1 WHERE sales_date = DATE '2026-08-04'")
    second = _backfill(shop_on_spark)
    report = second.audit()
    differing = [p.label for p in report["fct_daily_sales"].differing]
    assert differing == ["2026-08-04"]
    assert _versions(second)["fct_daily_sales"]["published"] == str(engine.snapshot_of(daily))


def test_the_record_of_publications_is_read_once_a_snapshot_and_an_outside_append_is_seen(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``published_versions`` (what publish and rollback reconcile with first) queries
    backfill_versions once per snapshot of it: this engine's own append extends what it read,
    and a commit by anyone else moves the snapshot, so the next call reads it."""
    from backfill.engines.spark import SparkEngine

    p = shop_on_spark
    bf = _backfill(p)
    engine: Any = bf.engine
    bf.audit()
    published = bf.publish("ours")
    reads: list[str] = []
    rows = engine._rows

    def counted(cur: Any, sql: str) -> list[tuple[Any, ...]]:
        if "backfill_versions" in sql:
            reads.append(sql)
        return rows(cur, sql)  # type: ignore[no-any-return]

    monkeypatch.setattr(engine, "_rows", counted)

    def fresh() -> list[Any]:  # another engine's read: nothing held
        assert p.settings is not None
        other = SparkEngine.from_settings(p.settings.engine)
        return other.published_versions(p)

    first = engine.published_versions(p)
    assert [v.publication_id for v in first] == [published.id]
    assert len(reads) == 1 and "VERSION AS OF" in reads[0]
    assert engine.published_versions(p) == first and len(reads) == 1  # unchanged: no query
    # The rollback reconciles (held: no query) and appends its own record (held too).
    rolled = p.rollback(published.id, note="back", engine=engine)
    now = engine.published_versions(p)
    assert len(reads) == 1
    assert [v.publication_id for v in now] == [published.id, rolled.id]
    assert now[1].rolls_back == published.id
    assert now == fresh()  # what a read of the table finds
    # An outside append: the snapshot moves, the next call reads it.
    table = engine.table("backfill_versions")
    _sql(
        engine,
        f"INSERT INTO {table} SELECT 'pub_outside', backfill_id, rolls_back, published_at, "
        f"keep_until, models FROM {table} WHERE publication_id = '{published.id}'",
    )
    after = engine.published_versions(p)
    assert len(reads) == 2
    outside = dataclasses.replace(now[0], publication_id="pub_outside")
    assert after == sorted([*now, outside], key=version_order)
    assert after == fresh()


def test_an_audit_of_few_rows_reads_each_model_in_one_query_with_the_diffs_new_side(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few rows (under ``held_rows``): the one query of a model's audit reads main's rows and
    the branch's together, and the diff of the differing partitions takes the branch's from
    it (a Spark job's fixed cost each saved); the findings are those of an audit that reads
    nothing up front."""
    bf = _backfill(shop_on_spark)
    engine: Any = bf.engine
    queries = _calls(monkeypatch, engine, "_arrow")
    report = bf.audit()
    assert all(report[m].differing for m in MODELS)  # the fix changes every model's days
    assert len(queries) == len(MODELS), queries
    # main's rows (side 0) and the branch's (side 1, at its head snapshot) in the one query
    assert all(" UNION ALL SELECT 1 AS __side" in q for q in queries), queries
    assert all("WITH ('split-size' = " in q for q in queries), queries  # see the next test
    monkeypatch.setattr(engine, "held_rows", 0)  # every question asked of the tables
    again = bf.audit()
    for m in MODELS:
        assert [p.to_dict() for p in again[m].partitions] == [
            p.to_dict() for p in report[m].partitions
        ]
        assert again[m].totals == report[m].totals
        assert again[m].diff is not None and report[m].diff is not None
        assert again[m].diff.summary == report[m].diff.summary


def test_the_column_types_of_a_snapshot_are_asked_once_and_are_that_snapshots(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audit reads each table at a pinned snapshot, whose column types it asks of many
    questions: asked of Spark once per snapshot (a second audit of the same snapshots asks
    none). The premise of remembering them: Iceberg reads a snapshot with the schema it was
    written with, so a column added later is not in an earlier snapshot's types."""
    bf = _backfill(shop_on_spark)
    engine: Any = bf.engine
    types = engine._types
    calls = _calls(monkeypatch, engine, "_types")
    first = bf.audit()
    asked = [c for c in calls if "VERSION AS OF" in c]
    # main's and the branch's snapshot of each model: once each
    assert len(asked) == len(set(asked)) == 2 * len(MODELS), asked
    again = bf.audit()
    assert [c for c in calls if "VERSION AS OF" in c] == asked
    assert [a.to_dict() for a in again.models.values()] == [
        a.to_dict() for a in first.models.values()
    ]
    # A table of its own (the shop's tables are shared by the session's tests, and putting
    # them back as built restores their snapshots, not their schema).
    table = engine.table("types_probe")
    _sql(engine, f"CREATE TABLE {table} USING iceberg AS SELECT 1 AS id")
    before = engine.snapshot_of(table)
    _sql(engine, f"ALTER TABLE {table} ADD COLUMN note string")
    _sql(engine, f"INSERT INTO {table} VALUES (2, 'added')")
    after = engine.snapshot_of(table)
    assert after != before
    assert engine.snapshot_types(table, before) == {"id": "int"}
    assert "note" not in types(f"(SELECT * FROM {table} VERSION AS OF {before})")  # Iceberg's
    assert engine.snapshot_types(table, after) == {"id": "int", "note": "string"}


def test_the_rows_of_an_audit_of_few_rows_are_read_in_about_a_task_a_core(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Iceberg plans a Spark task per few files, and a daily table of few rows has a file a
    day: the held query of a month of it reads each side in about one task a core instead,
    and finds what the audit that asks the tables finds."""
    p = shop_on_spark
    bf = p.backfill(p.plan("fct_daily_sales", "2026-07-01", "2026-08-01", as_of=AS_OF), reason="x")
    assert bf.run(concurrency=2, backoff=0.0).ok
    engine: Any = bf.engine
    queries = _calls(monkeypatch, engine, "_arrow")
    report = bf.audit()
    assert len(queries) == 1 and "WITH ('split-size' = " in queries[0], queries
    cores = engine.spark.sparkContext.defaultParallelism
    planned = re.sub(r" WITH \('split-size' = '\d+'\)", "", queries[0])
    assert engine.small.sql(queries[0]).rdd.getNumPartitions() <= 2 * cores  # two sides
    assert engine.small.sql(planned).rdd.getNumPartitions() > 2 * cores  # Iceberg's planning
    monkeypatch.setattr(engine, "held_rows", 0)
    again = bf.audit()
    assert again["fct_daily_sales"].to_dict() == report["fct_daily_sales"].to_dict()


def test_spark_jobs_are_described_by_what_runs_them(
    shop_on_spark: backfill.Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's UI and event log name each job by its description: an audit's queries say
    audit and the model, a publish's say publish, a rollback's say rollback (every query of the
    engine used to say audit)."""
    p = shop_on_spark
    bf = _backfill(p)
    engine: Any = bf.engine
    said = _calls(monkeypatch, engine, "_job")
    monkeypatch.setattr(engine, "held_rows", 0)  # the audit's questions as queries (_rows)
    bf.audit()
    audit = list(said)
    assert {f"backfill: audit of {m}" for m in MODELS} <= set(audit), audit
    said.clear()
    published = bf.publish("ours")
    assert said and not any("audit" in d for d in said), said
    assert f"backfill: publish {bf.id}" in said
    said.clear()
    engine._versions = None  # the record of publications is read again, as by a new process
    p.rollback(published.id, note="back", engine=engine)
    assert said and not any("audit" in d for d in said), said
    assert "backfill: the record of publications" in said
    assert any(d.startswith("backfill: rollback ") for d in said), said
