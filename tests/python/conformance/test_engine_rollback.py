"""The Engine conformance suite, rollback: every engine keeps what a publish replaces and puts it
back exactly (row for row, every partition's fingerprint), for replace, merge and full models and
a first build; a later publication over the same partitions makes a rollback refuse, naming it;
rollbacks in reverse order restore the original; a reader sees all old or all new where the
engine's publish promises that."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from engine_cases import AS_OF, WATCHED, Case, day, seen_during

import backfill
from backfill.engines import PUBLISHED

SHOP = ("fct_daily_sales", "fct_monthly_sales", "fct_sales_7d")
START, END = "2026-08-03", "2026-08-07"
NOTE = "the fix was wrong after all"
#: the engines keeping what a publish replaces in backup schemas
WITH_BACKUPS = ["duckdb", "postgres", "postgres-partitioned"]


def published(case: Case, models: tuple[str, ...] = SHOP) -> dict[str, Any]:
    """Each model's published rows (sorted) and per-partition fingerprints of its August; None
    for a model with no published table (or, on Iceberg, an empty one)."""
    aug = [
        (f"2026-08-{d:02d}", day(f"2026-08-{d:02d}"), day("2026-08-01") + dt.timedelta(days=d))
        for d in range(1, 31)
    ]
    out: dict[str, Any] = {}
    for m in models:
        cols = case.engine.columns(case.project, m, PUBLISHED)
        if cols is None:
            out[m] = None
            continue
        with case.engine.stream(case.project, m, PUBLISHED, None) as stream:
            rs = backfill.ArrowTable.from_arrow(stream).to_pylist()
        if not rs:
            out[m] = None  # Iceberg keeps a first build's emptied table: absent to readers
            continue
        rows = sorted(rs, key=lambda r: tuple(str(v) for v in r.values()))
        fps = case.engine.fingerprints(case.project, m, PUBLISHED, aug if _by_day(case, m) else [])
        out[m] = (rows, fps)
    return out


def _by_day(case: Case, model: str) -> bool:
    m = case.project.models[model]
    return m.grain == "day" and m.event_time is not None


def fix_and_publish(case: Case, start: str = START, end: str = END, **kw: Any) -> Any:
    plan = case.project.plan("fct_daily_sales+", start, end, as_of=AS_OF)
    bf = case.project.backfill(plan, reason="discount bug fixed", engine=case.engine, **kw)
    assert bf.run(concurrency=2, backoff=0.0).ok
    assert bf.audit().passed
    return bf.publish("revenue from 3 Aug about 2% lower")


def test_rollback_puts_back_exactly_what_a_publish_replaced(case: Case) -> None:
    before = published(case)
    case.apply_fix()
    pub = fix_and_publish(case)
    assert pub.keep_until is not None  # kept for the default 30 days
    after = published(case)
    assert all(after[m] != before[m] for m in SHOP)
    rb = case.project.rollback(pub.id, note=NOTE, engine=case.engine)
    assert rb.rolls_back == pub.id and rb.id.startswith("rb_")
    assert published(case) == before
    # The changelog tells it as a publication with old and new swapped.
    entries = case.project.changelog().publications()
    assert [e["kind"] for e in entries[:2]] == ["rollback", "publication"]
    undone, done = entries[0], entries[1]
    assert undone["reason"] == f"rollback of {pub.id}" and undone["note"] == NOTE
    forward = done["models"]["fct_daily_sales"]["totals"]["revenue"]
    back = undone["models"]["fct_daily_sales"]["totals"]["revenue"]
    assert (back["old"], back["new"]) == (forward["new"], forward["old"])
    assert back["delta"] == -forward["delta"] != 0
    # A rollback is a publication: rolling it back publishes the fix again.
    again = case.project.rollback(rb.id, note="the fix was right", engine=case.engine)
    assert again.rolls_back == rb.id
    assert published(case) == after


def test_a_later_publication_refuses_the_rollback_and_reverse_order_restores(case: Case) -> None:
    before = published(case)
    case.apply_fix()
    first = fix_and_publish(case)
    second = fix_and_publish(case, "2026-08-05", "2026-08-09", allow_overlap="a second fix")
    with pytest.raises(backfill.ConflictError, match=second.id) as refused:
        case.project.rollback(first.id, note=NOTE, engine=case.engine)
    assert "--force" in str(refused.value)
    undo = case.project.rollback(second.id, note=NOTE, engine=case.engine)
    with pytest.raises(backfill.ConflictError, match=f"already rolled back by {undo.id}"):
        case.project.rollback(second.id, note=NOTE, engine=case.engine)
    case.project.rollback(first.id, note=NOTE, engine=case.engine)
    assert published(case) == before


def test_a_forced_rollback_overwrites_later_changes_and_says_which(case: Case) -> None:
    before = published(case)
    case.apply_fix()
    first = fix_and_publish(case)
    fix_and_publish(case, "2026-08-05", "2026-08-09", allow_overlap="a second fix")
    rb = case.project.rollback(
        first.id, note=NOTE, force_reason="the second fix is redone", engine=case.engine
    )
    assert rb.forced_reason == "the second fix is redone"
    # the second changed the month (its days 7 and 8 are new) over the first
    assert "fct_monthly_sales" in rb.overwritten and "overwrote later changes" in str(rb)
    daily = published(case, ("fct_daily_sales",))["fct_daily_sales"]
    # the first's periods are as before it; the second's later days keep the second's rows
    old = {r["sales_date"]: r for r in before["fct_daily_sales"][0]}
    now = {r["sales_date"]: r for r in daily[0]}
    for d in range(3, 7):
        assert now[dt.date(2026, 8, d)] == old[dt.date(2026, 8, d)]
    assert now[dt.date(2026, 8, 7)] != old[dt.date(2026, 8, 7)]


def test_partitions_published_unchanged_are_neither_kept_nor_put_back(case: Case) -> None:
    """The fix changes August only: a backfill from 30 July publishes July's days as they were,
    so the publication keeps (and a rollback puts back) August's partitions alone, and the
    rollback still leaves every table exactly as before."""
    from backfill.run.ledger import ledger_for

    before = published(case)
    case.apply_fix()
    pub = fix_and_publish(case, "2026-07-30", "2026-08-05")
    kept = {km.model: km for km in ledger_for(case.project).kept_version(pub.id).models}
    daily = kept["fct_daily_sales"]
    assert [label for label, _, _ in daily.parts] == [
        "2026-08-01",
        "2026-08-02",
        "2026-08-03",
        "2026-08-04",
    ]
    assert daily.unchanged == ("2026-07-30", "2026-07-31")
    assert set(daily.after) == {label for label, _, _ in daily.parts}
    assert daily.rows == 4  # one row a day, August's only
    rb = case.project.rollback(pub.id, note=NOTE, engine=case.engine)
    assert rb.models["fct_daily_sales"] == [label for label, _, _ in daily.parts]
    assert published(case) == before
    # A backfill that changes nothing publishes nothing a rollback would put back.
    plan = case.project.plan("fct_daily_sales", "2026-07-28", "2026-07-30", as_of=AS_OF)
    bf = case.project.backfill(plan, reason="a re-run of July", engine=case.engine)
    assert bf.run(concurrency=2, backoff=0.0).ok and bf.audit().passed
    same = bf.publish("July re-run, nothing changed")
    nothing = ledger_for(case.project).kept_version(same.id).models
    assert [(km.parts, km.unchanged, km.restores_nothing) for km in nothing] == [
        ((), ("2026-07-28", "2026-07-29"), True)
    ]
    undone = case.project.rollback(same.id, note="nothing to undo", engine=case.engine)
    assert undone.models == {}
    assert published(case) == before


def test_a_rollback_is_seen_all_at_once_by_a_concurrent_reader(case: Case) -> None:
    old = case.snapshot_sums(WATCHED)
    case.apply_fix()
    pub = fix_and_publish(case)
    new = case.snapshot_sums(WATCHED)
    seen = seen_during(case, lambda: case.project.rollback(pub.id, note=NOTE, engine=case.engine))
    assert case.snapshot_sums(WATCHED) == old
    if case.engine.capabilities.atomic_publish:
        mixed = [s for s in seen if s not in (old, new)]
        assert not mixed, f"a reader saw a half-rolled-back state: {mixed[:3]}"


MERGE_SQL = """{{ config(strategy="merge", unique_key=["sales_date"], event_time="sales_date") }}
select sales_date, revenue, orders from {{ ref("fct_daily_sales") }} d
where sales_date >= {{ start }} and sales_date < {{ end }}
"""
FULL_SQL = """{{ config(strategy="full", grain=none, event_time=none) }}
select count(*) as days, sum(revenue) as revenue from {{ ref("fct_daily_sales") }} d
"""
EXTRA = ("sales_merge", "sales_total")


@pytest.mark.parametrize("case", [*WITH_BACKUPS, "spark"], indirect=True)
def test_merge_full_and_first_build_roll_back_exactly(case: Case) -> None:
    # Two models the shop does not have: a merge on the day, a full rebuild (no grain).
    (case.root / "models" / "sales_merge.sql").write_text(MERGE_SQL)
    (case.root / "models" / "sales_total.sql").write_text(FULL_SQL)
    case.reload()
    # A first build through an audit: its rollback leaves the new tables absent.
    plan = case.project.plan("sales_merge sales_total", "2026-07-01", "2026-09-01", as_of=AS_OF)
    bf = case.project.backfill(plan, reason="new models", engine=case.engine)
    assert bf.run(concurrency=2, backoff=0.0).ok
    bf.audit()
    first = bf.publish("two new models")
    built = published(case, EXTRA)
    assert all(built[m] is not None for m in EXTRA)
    case.project.rollback(first.id, note="not yet", engine=case.engine)
    assert published(case, EXTRA) == dict.fromkeys(EXTRA)
    if case.name != "spark":  # Iceberg keeps the emptied table; elsewhere it is gone
        assert all(case.engine.columns(case.project, m, PUBLISHED) is None for m in EXTRA)
    # Built again (directly), then the fix through every model, published and rolled back.
    direct = case.project.backfill(plan, reason="new models", engine=case.engine, direct=True)
    assert direct.run(concurrency=2, backoff=0.0).ok
    before = published(case, (*SHOP, *EXTRA))
    case.apply_fix()
    pub = fix_and_publish(case)
    after = published(case, (*SHOP, *EXTRA))
    assert all(after[m] != before[m] for m in (*SHOP, *EXTRA))
    case.project.rollback(pub.id, note=NOTE, engine=case.engine)
    assert published(case, (*SHOP, *EXTRA)) == before


VIEW_SQL = """{{{{ config(strategy="view", grain=none, event_time=none) }}}}
select sales_date, {expr} as shown from {{{{ ref("fct_daily_sales") }}}} d
"""


@pytest.mark.parametrize("case", WITH_BACKUPS, indirect=True)  # Iceberg keeps no views
def test_a_view_gets_its_old_definition_back(case: Case) -> None:
    """A publication that re-creates a view keeps the definition it replaced; the rollback puts
    that definition back (the view reads the restored table through it again)."""
    (case.root / "models" / "sales_view.sql").write_text(VIEW_SQL.format(expr="revenue"))
    case.reload()
    plan = case.project.plan("sales_view", "2026-07-01", "2026-09-01", as_of=AS_OF)
    built = case.project.backfill(plan, reason="a view", engine=case.engine, direct=True)
    assert built.run(concurrency=2, backoff=0.0).ok
    before = published(case, (*SHOP, "sales_view"))
    assert before["sales_view"] is not None
    # The fix, and the view now shows revenue in cents: both published together.
    (case.root / "models" / "sales_view.sql").write_text(VIEW_SQL.format(expr="revenue * 100"))
    case.apply_fix()
    pub = fix_and_publish(case)
    from backfill.run.ledger import ledger_for

    kept = {km.model: km for km in ledger_for(case.project).kept_version(pub.id).models}
    assert kept["sales_view"].strategy == "view" and kept["sales_view"].definition
    assert "100" not in kept["sales_view"].definition
    after = published(case, ("sales_view",))["sales_view"]
    assert after != before["sales_view"]
    cents = {r["sales_date"]: r["shown"] for r in after[0]}
    assert cents[dt.date(2026, 7, 1)] == 100 * next(
        r["shown"] for r in before["sales_view"][0] if r["sales_date"] == dt.date(2026, 7, 1)
    )
    case.project.rollback(pub.id, note=NOTE, engine=case.engine)
    assert published(case, (*SHOP, "sales_view")) == before


@pytest.mark.parametrize("case", [*WITH_BACKUPS, "spark"], indirect=True)
def test_gc_drops_an_expired_backup_and_leaves_the_published_tables(case: Case) -> None:
    """After its retention a publication's backup goes (a merge's kept keys too, which Spark
    keeps as a table), the published tables stay as they are, and its rollback is refused with
    the date it expired."""
    from backfill.engines.registry import engine_for
    from backfill.publish import collect_garbage
    from backfill.run.ledger import ledger_for

    (case.root / "models" / "sales_merge.sql").write_text(MERGE_SQL)
    case.reload()
    plan = case.project.plan("sales_merge", "2026-07-01", "2026-09-01", as_of=AS_OF)
    direct = case.project.backfill(plan, reason="new model", engine=case.engine, direct=True)
    assert direct.run(concurrency=2, backoff=0.0).ok
    case.apply_fix()
    pub = fix_and_publish(case)
    after = published(case, (*SHOP, "sales_merge"))
    ledger = ledger_for(case.project)
    until = dt.datetime.fromisoformat(pub.keep_until)
    gc_engine = engine_for(case.project)  # gc closes the engine it is given
    report = collect_garbage(case.project, ledger, gc_engine, now=until)
    assert list(report.dropped) == [pub.id]
    assert ledger.kept_version(pub.id).dropped_at == until.isoformat(timespec="seconds")
    assert case.engine.backup_rows(pub.id) is None
    if case.name == "spark":
        spark, catalog = case.engine.spark, case.engine.catalog
        names = [str(r[0]) for r in spark.sql(f"SHOW NAMESPACES IN `{catalog}`").collect()]
        assert f"backup_{pub.id}" not in names, names
        assert report.maintenance  # expired snapshots, compacted files: said per table
    assert published(case, (*SHOP, "sales_merge")) == after
    with pytest.raises(backfill.ConflictError, match=re.escape(f"kept until {pub.keep_until}")):
        case.project.rollback(pub.id, note=NOTE, engine=case.engine)
