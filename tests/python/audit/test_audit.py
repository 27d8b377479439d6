"""Audit, gates, publish, changelog, discard, estimate and the run-twice check, on the shop."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

import backfill
from backfill import estimate
from backfill.audit import AuditReport, Version, check_run_twice, choose_key
from backfill.audit.gates import ModelFacts, evaluate, parse_gates
from backfill.engines import PUBLISHED
from backfill.engines.duckdb import audit_schema
from backfill.examples import shop
from shop_support import AS_OF, cli, copy_built, query

D = dt.date


@pytest.fixture
def shop_dir(built_shop: Path, tmp_path: Path) -> Path:
    dest = copy_built(built_shop, tmp_path / "shop")
    shop.fix(dest)
    return dest


def run_fix(
    root: Path,
    start: str,
    end: str,
    reason: str = "discount bug fixed",
    allow_overlap: str | None = None,
) -> Any:
    p = backfill.Project.load(root)
    bf = p.backfill(
        p.plan("fct_daily_sales+", start, end, as_of=AS_OF),
        reason=reason,
        allow_overlap=allow_overlap,
    )
    assert bf.run(concurrency=4).ok
    return bf


def expected_daily_revenue(root: Path, start: str, end: str) -> dict[D, Decimal]:
    """Oracle: the fixed revenue per day straight from the raw tables (no models, no refs)."""
    rows = query(
        root,
        f"""
        SELECT cast(o.ordered_at AS DATE),
               cast(sum(i.quantity * i.unit_price * (1 - coalesce(i.discount,
                    i.discount_pct * 0.01, 0))) AS DECIMAL(18, 2))
        FROM raw.orders o JOIN raw.order_items i USING (order_id)
        WHERE lower(o.status) = 'completed' AND i.quantity > 0
          AND o.ordered_at >= DATE '{start}' AND o.ordered_at < DATE '{end}'
        GROUP BY 1""",
    )
    return {r[0]: r[1] for r in rows}


# -- the audit finds exactly what the fix changes ----------------------------------------------
def test_audit_finds_exactly_the_changes_of_the_fix(shop_dir: Path) -> None:
    published = {
        r[0]: r[1] for r in query(shop_dir, "SELECT sales_date, revenue FROM main.fct_daily_sales")
    }
    bf = run_fix(shop_dir, "2026-07-25", "2026-08-10")
    report = bf.audit()
    assert isinstance(report, AuditReport)
    # fct_daily_sales+ : the fixed model and everything downstream (nothing upstream).
    assert list(report.models) == ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]

    # fct_daily_sales: only revenue, only on the days from 1 Aug, by exactly the fix's amount.
    fixed = expected_daily_revenue(shop_dir, "2026-07-25", "2026-08-10")
    delta = {d: fixed[d] - published[d] for d in fixed}
    assert all(v == 0 for d, v in delta.items() if d < D(2026, 8, 1))
    changed_days = {d for d, v in delta.items() if v != 0}
    assert changed_days and min(changed_days) >= D(2026, 8, 1)
    daily = report["fct_daily_sales"]
    assert daily.key == ["sales_date"] and daily.key_source == "natural"
    assert {p.label for p in daily.differing} == {d.isoformat() for d in changed_days}
    assert daily.diff is not None
    assert daily.diff.summary.rows_old == len(changed_days)  # identical days never moved
    assert daily.changed_columns == {"revenue": len(changed_days)}
    assert (daily.diff.summary.added, daily.diff.summary.removed) == (0, 0)
    for p in daily.differing:
        _old, _new, d, _ = p.measures["revenue"]
        assert d == delta[D.fromisoformat(p.label)]  # exact: Decimal, not a float
    old_total, new_total = daily.totals["revenue"]
    assert old_total is not None and new_total is not None
    assert new_total < old_total
    rev = next(r for r in daily.diff.columns.to_pylist() if r["column"] == "revenue")
    assert -3.0 < rev["pct_delta"] < -1.0  # about 2% lower on the affected days
    for other in ("orders", "units"):  # nothing else changed
        assert daily.totals[other][0] == daily.totals[other][1]

    # fct_monthly_sales: July identical, August lower by the sum of the daily deltas.
    monthly = report["fct_monthly_sales"]
    assert [p.label for p in monthly.partitions] == ["2026-07", "2026-08"]
    assert [p.label for p in monthly.differing] == ["2026-08"]
    assert monthly.changed_columns == {"revenue": 1}
    aug = monthly.differing[0].measures["revenue"]
    assert aug[2] == sum(delta.values())

    # fct_sales_7d: each day's window moves by the daily deltas inside it.
    rolling = report["fct_sales_7d"]
    expect7 = {}
    for p in rolling.partitions:
        day = D.fromisoformat(p.label)
        expect7[p.label] = sum(
            (v for d, v in delta.items() if day - dt.timedelta(6) <= d <= day), Decimal(0)
        )
    assert {p.label for p in rolling.differing} == {k for k, v in expect7.items() if v != 0}
    assert rolling.changed_columns == {"revenue_7d": len(rolling.differing)}
    for p in rolling.differing:
        assert p.measures["revenue_7d"][2] == expect7[p.label]
        assert (p.added, p.removed, p.changed) == (0, 0, 1)

    # backfill.yml gates: revenue within [-5%, 0%], no removed rows
    assert report.passed and [g.gate for g in report.gates] == [
        "revenue change in [-5%, 0%]",
        "removed_rows <= 0",
    ]
    # Recorded in the ledger, one row per model with the published fingerprints.
    rows = bf.ledger.audits(bf.id)
    assert {r["model"] for r in rows} == set(report.models)
    assert all(r.audit_id == report.audit_id for r in rows)
    # Displays and tables
    text = str(report)
    assert "fct_daily_sales" in text and "PASS" in text and "revenue" in text
    html = report._repr_html_()
    assert html is not None and "<table>" in html and "<svg" in html
    df = report.to_pandas()
    assert set(df["model"]) == set(report.models)
    assert report.deltas.to_pandas().query("model == 'fct_daily_sales'").shape[0] == len(
        changed_days
    ) * len(daily.measures)
    import pyarrow as pa

    assert pa.table(report.partitions).num_rows == sum(
        len(m.partitions) for m in report.models.values()
    )


def test_models_are_audited_side_by_side_and_reported_in_order(
    shop_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each model's first question to the engine waits until another model's has arrived too:
    # audited one after another, the first would wait alone and the barrier would break.
    bf = run_fix(shop_dir, "2026-07-25", "2026-08-10")
    alone = bf.audit()
    meet, lock, asked = threading.Barrier(2, timeout=60), threading.Lock(), set()
    real = bf.engine.fingerprints

    def fingerprints(project: Any, model: str, area: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            first = model not in asked and len(asked) < 2
            asked.add(model)
        if first:
            meet.wait()
        return real(project, model, area, *args, **kwargs)

    monkeypatch.setattr(bf.engine, "fingerprints", fingerprints)
    report = bf.audit()
    assert list(report.models) == ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]
    assert [a.to_dict() for a in report.models.values()] == [
        a.to_dict() for a in alone.models.values()
    ]  # the same findings as the audit before


def test_the_models_with_most_partitions_start_first_and_the_report_keeps_the_order(
    shop_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Longest first: the 7-day model (its window reaches 6 days past the fix's) before the
    # daily one it reads, the monthly rollup last, whatever the topological order says; the
    # report lists the models in that order still.
    from backfill.audit import audit as audit_module

    bf = run_fix(shop_dir, "2026-07-25", "2026-08-11")
    started: list[str] = []
    real = audit_module.audit_model

    def audit_model(
        engine: Any,
        project: Any,
        backfill_id: str,
        area: Any,
        model: str,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        started.append(model)
        return real(engine, project, backfill_id, area, model, *args, **kwargs)

    monkeypatch.setattr(audit_module, "audit_model", audit_model)
    monkeypatch.setattr(audit_module, "AUDIT_THREADS", 1)  # one at a time: the start order
    parts = bf.partitions()
    assert [len(parts[m]) for m in ("fct_daily_sales", "fct_sales_7d", "fct_monthly_sales")] == [
        17,
        23,
        2,
    ]
    report = bf.audit()
    assert started == ["fct_sales_7d", "fct_daily_sales", "fct_monthly_sales"]
    assert list(report.models) == ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]


def test_a_model_whose_audit_fails_fails_the_audit_with_its_own_error(
    shop_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bf = run_fix(shop_dir, "2026-07-25", "2026-08-10")
    real = bf.engine.fingerprints

    def fingerprints(project: Any, model: str, area: Any, *args: Any, **kwargs: Any) -> Any:
        if model == "fct_monthly_sales":
            raise RuntimeError("the warehouse fell over reading fct_monthly_sales")
        return real(project, model, area, *args, **kwargs)

    monkeypatch.setattr(bf.engine, "fingerprints", fingerprints)
    with pytest.raises(RuntimeError, match="fell over reading fct_monthly_sales"):
        bf.audit()
    assert bf.ledger.audits(bf.id) == []  # nothing recorded: no report of two models of three


def test_natural_key_prefers_ids_and_needs_uniqueness(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    engine = backfill.DuckDBEngine(shop_dir / "warehouse.duckdb")
    published = Version(PUBLISHED)

    def key(model: str) -> tuple[list[str], str]:
        columns = engine.columns(p, model, PUBLISHED)
        assert columns is not None
        return choose_key(engine, p, model, [published], columns, None)

    try:
        assert key("clean_order_items") == (["order_id", "line_no"], "natural")
        assert key("clean_orders") == (["order_id"], "natural")
        assert key("fct_monthly_sales") == (["sales_month"], "natural")
    finally:
        engine.close()


def test_a_first_key_candidate_that_repeats_is_replaced_by_the_checked_key(tmp_path: Path) -> None:
    # The audit tries the first candidate (order_id) in the diff itself; an order has several
    # lines, so the diff finds duplicates and the engine-checked key (order_id, line_no) is
    # used instead: the same key and counts as checking first.
    (tmp_path / "models").mkdir()
    (tmp_path / "backfill.yml").write_text(
        "name: lines\nengine: {type: duckdb, path: w.duckdb}\nstate: .backfill\n"
        "sources:\n  raw:\n    lines: {grain: day, tz: UTC, event_time: ordered_at}\n"
        "models:\n  defaults: {grain: day, tz: UTC, begin: '2026-08-01', strategy: replace}\n"
        "  order_lines: {}\n"
    )
    sql = (
        '{{{{ config(event_time="ordered_at") }}}}\nselect order_id, line_no, qty{bump} as qty,'
        ' ordered_at from {{{{ source("raw", "lines") }}}}\nwhere ordered_at >= {{{{ start }}}}'
        " and ordered_at < {{{{ end }}}}\n"
    )
    (tmp_path / "models" / "order_lines.sql").write_text(sql.format(bump=""))
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute(
        "CREATE SCHEMA raw; CREATE TABLE raw.lines AS SELECT i // 3 AS order_id, "
        "i % 3 AS line_no, i % 5 AS qty, TIMESTAMP '2026-08-01' + to_hours(i // 3) AS ordered_at "
        "FROM range(216) t(i)"
    )  # an order's lines share its time: 72 lines a day
    con.close()
    p = backfill.Project.load(tmp_path)
    assert (
        p.backfill(
            p.plan("*", "2026-08-01", "2026-08-04", as_of=AS_OF), reason="build", direct=True
        )
        .run()
        .ok
    )
    # The fix changes qty on 2 Aug only.
    (tmp_path / "models" / "order_lines.sql").write_text(
        sql.format(
            bump=" + CASE WHEN ordered_at >= TIMESTAMP '2026-08-02' AND ordered_at < "
            "TIMESTAMP '2026-08-03' THEN 1 ELSE 0 END"
        )
    )
    p = backfill.Project.load(tmp_path)
    bf = p.backfill(p.plan("*", "2026-08-01", "2026-08-04", as_of=AS_OF), reason="fix")
    assert bf.run().ok
    a = bf.audit()["order_lines"]
    assert (a.key, a.key_source) == (["order_id", "line_no"], "natural")
    assert [x.label for x in a.differing] == ["2026-08-02"]
    assert a.diff is not None and a.diff.summary.duplicate_keys == 0
    assert (a.diff.summary.changed, a.diff.summary.added, a.diff.summary.removed) == (72, 0, 0)
    assert a.changed_columns == {"qty": 72} and a.measures == ["qty"]
    assert list(a.timings) == ["fingerprint scan", "key", "measure sums", "transfer", "diff"]


def test_merge_and_full_models_audit_and_publish(shop_dir: Path) -> None:
    models = shop_dir / "models"
    (models / "order_status.sql").write_text(
        "{{ config(strategy='merge', unique_key='order_id', event_time='ordered_at') }}\n"
        "select order_id, status, ordered_at from {{ ref('clean_orders') }}\n"
        "where ordered_at >= {{ start }} and ordered_at < {{ end }}\n"
    )
    (models / "countries.sql").write_text(
        "{{ config(grain=none, strategy='full') }}\n"
        "select country, count(*) as orders from {{ ref('clean_orders') }} group by 1\n"
    )
    p = backfill.Project.load(shop_dir)
    plan = p.plan("order_status countries", "2026-03-01", "2026-03-04", as_of=AS_OF)
    assert p.backfill(plan, reason="new models", direct=True).run().ok
    outside = query(
        shop_dir,
        "SELECT count(*), min(status) FROM main.order_status WHERE "
        "ordered_at >= TIMESTAMP '2026-03-03'",
    )
    # New logic: statuses upper-case, only completed orders (a merge keeps the others' rows);
    # countries count only completed orders.
    (models / "order_status.sql").write_text(
        (models / "order_status.sql")
        .read_text()
        .replace("select order_id, status", "select order_id, upper(status) as status")
        .replace("< {{ end }}", "< {{ end }} and status = 'completed'")
    )
    (models / "countries.sql").write_text(
        (models / "countries.sql")
        .read_text()
        .replace("group by 1", "where status = 'completed' group by 1")
    )
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("order_status countries", "2026-03-01", "2026-03-03", as_of=AS_OF),
        reason="new logic",
    )
    assert bf.run().ok
    report = bf.audit()
    merge, full = report["order_status"], report["countries"]
    assert (merge.key, merge.key_source) == (["order_id"], "unique_key")
    rows = query(
        shop_dir,
        "SELECT count(*) FROM main.order_status WHERE ordered_at >= "
        "TIMESTAMP '2026-03-01' AND ordered_at < TIMESTAMP '2026-03-03' "
        "AND status = 'completed'",
    )[0][0]
    assert merge.changed_columns == {"status": rows} and [p.label for p in merge.differing] == [
        "2026-03-01",
        "2026-03-02",
    ]
    assert merge.diff is not None and merge.diff.summary.removed == 0  # what publish will do
    assert (full.key, full.key_source) == (["country"], "natural")
    assert [p.label for p in full.partitions] == ["all"] and set(full.changed_columns) == {"orders"}
    bf.publish(note="upper-case statuses; completed orders only")
    assert query(
        shop_dir,
        "SELECT DISTINCT status FROM main.order_status WHERE ordered_at < "
        "TIMESTAMP '2026-03-03' ORDER BY 1",
    ) == [("COMPLETED",), ("cancelled",)]
    assert (
        query(
            shop_dir,
            "SELECT count(*), min(status) FROM main.order_status WHERE "
            "ordered_at >= TIMESTAMP '2026-03-03'",
        )
        == outside
    )
    assert query(shop_dir, "SELECT sum(orders) FROM main.countries") == query(
        shop_dir, "SELECT count(*) FROM main.clean_orders WHERE status = 'completed'"
    )


def test_a_view_is_published_as_a_view_with_its_new_definition(shop_dir: Path) -> None:
    view = shop_dir / "models" / "big_orders.sql"
    view.write_text(
        "{{ config(grain=none, strategy='view') }}\n"
        "select * from {{ ref('clean_orders') }} where customer_id < 100\n"
    )
    p = backfill.Project.load(shop_dir)
    plan = p.plan("big_orders", "2026-03-01", "2026-03-02", as_of=AS_OF)
    assert p.backfill(plan, reason="a view", direct=True).run().ok
    count = "SELECT count(*) FROM main.clean_orders WHERE customer_id < {}"
    assert query(shop_dir, "SELECT count(*) FROM main.big_orders") == query(
        shop_dir, count.format(100)
    )
    view.write_text(view.read_text().replace("< 100", "< 50"))
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("big_orders", "2026-03-01", "2026-03-02", as_of=AS_OF), reason="narrower view"
    )
    assert bf.run().ok
    report = bf.audit()
    removed = query(
        shop_dir,
        "SELECT count(*) FROM main.clean_orders WHERE customer_id >= 50 AND customer_id < 100",
    )[0][0]
    assert removed > 0 and report["big_orders"].diff is not None
    assert report["big_orders"].diff.summary.removed == removed
    # unpublished: readers still see the old definition
    assert query(shop_dir, "SELECT count(*) FROM main.big_orders") == query(
        shop_dir, count.format(100)
    )
    bf.publish(note="only the first 50 customers")
    assert query(
        shop_dir,
        "SELECT table_type FROM information_schema.tables WHERE "
        "table_schema = 'main' AND table_name = 'big_orders'",
    ) == [("VIEW",)]
    assert query(shop_dir, "SELECT count(*) FROM main.big_orders") == query(
        shop_dir, count.format(50)
    )


def test_a_new_model_is_audited_as_added_rows_and_published_as_a_new_table(shop_dir: Path) -> None:
    (shop_dir / "models" / "fct_country_sales.sql").write_text(
        "{{ config(event_time='sales_date') }}\n"
        "select cast(ordered_at as date) as sales_date, country, count(*) as orders\n"
        "from {{ ref('clean_orders') }}\n"
        "where ordered_at >= {{ start }} and ordered_at < {{ end }} group by all\n"
    )
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("fct_country_sales", "2026-03-01", "2026-03-04", as_of=AS_OF),
        reason="new table with history",
    )
    assert bf.run().ok
    report = bf.audit(gates={"fct_country_sales": [{"removed_rows": 0}]})
    a = report["fct_country_sales"]
    expected = query(
        shop_dir,
        "SELECT count(DISTINCT (cast(ordered_at AS DATE), country)) FROM "
        "main.clean_orders WHERE ordered_at >= DATE '2026-03-01' AND "
        "ordered_at < DATE '2026-03-04'",
    )[0][0]
    assert (a.key, a.key_source) == (["sales_date", "country"], "natural")
    assert a.diff is not None and a.diff.summary.added == expected and report.passed
    assert all(p.rows_old == 0 and p.added == p.rows_new for p in a.partitions)
    bf.publish(note="new table")
    assert query(shop_dir, "SELECT count(*) FROM main.fct_country_sales") == [(expected,)]


def test_hourly_model_in_berlin_across_the_fall_back_night(shop_dir: Path) -> None:
    model = shop_dir / "models" / "fct_hourly_orders.sql"
    model.write_text(
        "{{ config(grain='hour', tz='Europe/Berlin', event_time='hour') }}\n"
        "select date_trunc('hour', ordered_at) as hour, count(*) as orders\n"
        "from {{ ref('clean_orders') }}\n"
        "where ordered_at >= {{ start }} and ordered_at < {{ end }} group by 1\n"
    )
    p = backfill.Project.load(shop_dir)
    build = p.plan(
        "fct_hourly_orders",
        "2026-10-24",
        "2026-10-27",
        tz="Europe/Berlin",
        as_of=AS_OF,
        partitions_per_run=24,
    )
    assert p.backfill(build, reason="new", direct=True).run().ok
    model.write_text(model.read_text().replace("group by 1", "and status = 'completed' group by 1"))
    p = backfill.Project.load(shop_dir)
    bf = p.backfill(
        p.plan("fct_hourly_orders", "2026-10-25", "2026-10-26", tz="Europe/Berlin", as_of=AS_OF),
        reason="completed orders only",
    )
    assert bf.run().ok
    a = bf.audit()["fct_hourly_orders"]
    labels = [x.label for x in a.partitions]
    assert len(labels) == 25 and "2026-10-25T02+02:00" in labels and "2026-10-25T02+01:00" in labels
    assert a.diff is not None
    # Each changed row is counted in exactly the partition the engine wrote it to.
    assert sum(x.changed for x in a.partitions) == a.diff.summary.changed > 0
    # Oracle: the orders delta of each Berlin hour = minus its non-completed orders (UTC hours
    # mapped to Berlin hour partitions by the calendar, outside the diff).
    dropped: dict[str, int] = {}
    for hour, n in query(
        shop_dir,
        "SELECT date_trunc('hour', ordered_at), count(*) FROM "
        "main.clean_orders WHERE status <> 'completed' AND ordered_at "
        ">= TIMESTAMP '2026-10-24 22:00' AND ordered_at < "
        "TIMESTAMP '2026-10-25 23:00' GROUP BY 1",
    ):
        label = backfill.partition_of(
            hour.replace(tzinfo=dt.timezone.utc), "hour", "Europe/Berlin"
        ).label
        dropped[label] = dropped.get(label, 0) + n
    assert dropped
    for x in a.partitions:
        delta = x.measures["orders"][2] if not x.identical else 0
        assert delta == -dropped.get(x.label, 0), x.label


# -- publish --------------------------------------------------------------------------------------
def test_publish_is_atomic_for_a_concurrent_reader(shop_dir: Path) -> None:
    bf = run_fix(shop_dir, "2026-08-01", "2026-09-01")
    report = bf.audit()
    assert report.passed
    old_aug = query(
        shop_dir, "SELECT revenue FROM main.fct_monthly_sales WHERE sales_month = DATE '2026-08-01'"
    )[0][0]
    engine = bf.engine
    # One statement reads all three models; in any one snapshot they must agree with each other.
    sql = """SELECT
        (SELECT sum(revenue) FROM main.fct_daily_sales
          WHERE sales_date >= DATE '2026-08-01' AND sales_date < DATE '2026-09-01'),
        (SELECT revenue FROM main.fct_monthly_sales WHERE sales_month = DATE '2026-08-01'),
        (SELECT sum(revenue) FROM main.fct_daily_sales
          WHERE sales_date BETWEEN DATE '2026-08-14' AND DATE '2026-08-20'),
        (SELECT revenue_7d FROM main.fct_sales_7d WHERE sales_date = DATE '2026-08-20')"""
    seen: list[tuple[float, float, float, float]] = []
    stamps: list[float] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            with engine.connect() as cur:
                while not stop.is_set():
                    row = cur.execute(sql).fetchone()
                    assert row is not None
                    seen.append(tuple(float(v) for v in row))  # type: ignore[arg-type]
                    stamps.append(time.perf_counter())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    while len(seen) < 5:
        time.sleep(0.005)
    began = time.perf_counter()
    bf.publish(note="revenue corrected")
    ended = time.perf_counter()
    n_at_publish = len(seen)
    while len(seen) < n_at_publish + 5:
        time.sleep(0.005)
    stop.set()
    t.join()
    engine.close()
    assert not errors
    assert any(began <= s <= ended for s in stamps)  # the reader read while publish ran
    versions = set()
    for daily_aug, monthly_aug, week, rolling in seen:
        assert daily_aug == pytest.approx(monthly_aug, abs=1e-6)  # daily and monthly agree
        assert week == pytest.approx(rolling, abs=1e-6)  # daily and 7-day agree
        versions.add("old" if monthly_aug == pytest.approx(float(old_aug)) else "new")
    assert versions == {"old", "new"} and len(seen) > 10
    assert not query(
        shop_dir, f"SELECT * FROM duckdb_schemas() WHERE schema_name = '{audit_schema(bf.id)}'"
    )  # audit area dropped
    assert bf.status().status == "published"


_READER = """
import json, sys, time, duckdb
path, out, stop, sql = sys.argv[1:5]
with open(out, "a") as f:
    while True:
        try:
            c = duckdb.connect(path, read_only=True)
        except duckdb.Error:  # the writer holds the file (DuckDB: one process at a time)
            time.sleep(0.002)
            continue
        try:
            f.write(json.dumps([float(v) for v in c.execute(sql).fetchone()]) + "\\n")
            f.flush()
        finally:
            c.close()
        try:
            open(stop).close()
            break
        except FileNotFoundError:
            time.sleep(0.002)
"""


def test_publish_is_atomic_for_a_reader_in_another_process(shop_dir: Path, tmp_path: Path) -> None:
    bf = run_fix(shop_dir, "2026-08-01", "2026-09-01")
    assert bf.audit().passed
    out, stop = tmp_path / "seen.jsonl", tmp_path / "stop"
    sql = (
        "SELECT (SELECT sum(revenue) FROM main.fct_daily_sales WHERE sales_date >= "
        "DATE '2026-08-01' AND sales_date < DATE '2026-09-01'), (SELECT revenue FROM "
        "main.fct_monthly_sales WHERE sales_month = DATE '2026-08-01')"
    )
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _READER,
            str(shop_dir / "warehouse.duckdb"),
            str(out),
            str(stop),
            sql,
        ]
    )
    try:

        def count() -> int:
            return len(out.read_text().splitlines()) if out.exists() else 0

        deadline = time.monotonic() + 30
        while count() < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        before = count()
        bf.publish(note="revenue corrected")
        while count() < before + 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.touch()
        reader.wait(timeout=30)
    finally:
        reader.kill()
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(d == pytest.approx(m, abs=1e-6) for d, m in seen)  # never a mix
    assert seen[0][1] > seen[-1][1]  # saw the old version, then the new one


def test_publish_refuses_a_failed_gate_unless_forced(shop_dir: Path) -> None:
    bf = run_fix(shop_dir, "2026-08-01", "2026-08-08")
    report = bf.audit(
        gates={
            "fct_daily_sales": [{"measure": "revenue", "change": ["0%", "5%"]}],
            "*": [{"changed_rows_per_partition": 0}],
        }
    )
    assert not report.passed
    failed = [g for g in report.gates if not g.passed]
    assert {g.model for g in failed} == {"fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"}
    rev = next(g for g in failed if g.gate.startswith("revenue change in [0%"))
    assert "below 0%" in rev.reason and "->" in rev.reason
    before = query(shop_dir, "SELECT sum(revenue) FROM main.fct_daily_sales")
    with pytest.raises(backfill.ConflictError, match=r"failed .* gate"):
        bf.publish(note="try")
    assert query(shop_dir, "SELECT sum(revenue) FROM main.fct_daily_sales") == before
    # The CLI says the same with exit 1.
    r = cli("publish", bf.id, "--project", str(shop_dir), "--note", "try")
    assert r.returncode == 1 and "refused" in r.stderr and "gate" in r.stderr
    pub = bf.publish(note="reviewed by finance", force_reason="finance approved the drop")
    assert pub.forced_reason == "finance approved the drop"
    assert query(shop_dir, "SELECT sum(revenue) FROM main.fct_daily_sales") != before
    rows = query(shop_dir, "SELECT DISTINCT forced_reason, note FROM main.backfill_changelog")
    assert rows == [("finance approved the drop", "reviewed by finance")]


def test_publish_refuses_a_stale_audit(shop_dir: Path) -> None:
    first = run_fix(shop_dir, "2026-08-01", "2026-08-05", reason="first")
    # Two backfills over 3-4 August: refused when the second is created, unless a reason is
    # given; then the publish check is what stops the second from overwriting the first.
    with pytest.raises(backfill.ConflictError, match=f"open backfill.* {first.id}"):
        run_fix(shop_dir, "2026-08-03", "2026-08-08", reason="second")
    second = run_fix(
        shop_dir,
        "2026-08-03",
        "2026-08-08",
        reason="second",
        allow_overlap="both planned on purpose: the race",
    )
    first.audit()
    second.audit()
    first.publish(note="first")
    with pytest.raises(backfill.ConflictError, match="changed since the audit"):
        second.publish(note="second")
    # Re-audit: Aug 3-4 are now identical to what first published; the rest still differs.
    report = second.audit()
    daily = report["fct_daily_sales"]
    assert {p.label for p in daily.partitions if p.identical} >= {"2026-08-03", "2026-08-04"}
    assert second.publish(note="second").models["fct_daily_sales"]
    # A task re-run after the audit also makes it stale.
    third = run_fix(shop_dir, "2026-08-10", "2026-08-12", reason="third")
    third.audit()
    with third.engine.connect() as cur:
        cur.execute(
            f"DELETE FROM {audit_schema(third.id)}.fct_daily_sales "
            "WHERE sales_date = DATE '2026-08-10'"
        )
    with pytest.raises(backfill.ConflictError, match="audit area of fct_daily_sales changed"):
        third.publish(note="third")


def test_changelog_tells_consumers_what_changed(shop_dir: Path) -> None:
    bf = run_fix(shop_dir, "2026-08-01", "2026-08-04")
    report = bf.audit()
    bf.publish(note="revenue corrected")
    log = backfill.Project.load(shop_dir).changelog()
    assert len(log) == 1
    (pub,) = log.publications()
    assert pub["reason"] == "discount bug fixed" and pub["note"] == "revenue corrected"
    assert pub["published_by"]
    assert set(pub["models"]) == set(report.models)
    assert pub["models"]["fct_daily_sales"]["changed_partitions"] == [
        p.label for p in report["fct_daily_sales"].differing
    ]
    # per-partition deltas in the warehouse table equal the audit's
    rows = query(
        shop_dir,
        "SELECT partition, delta FROM main.backfill_changelog WHERE "
        "model = 'fct_daily_sales' AND measure = 'revenue' AND partition "
        "IS NOT NULL ORDER BY 1",
    )
    assert rows == [
        (p.label, p.measures["revenue"][2]) for p in report["fct_daily_sales"].differing
    ]
    text = str(log)
    assert "fct_daily_sales: 3 of 3 partition(s) changed" in text and "revenue -" in text
    r = cli("changelog", "--project", str(shop_dir), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["note"] == "revenue corrected"
    assert bf.ledger.publications(bf.id)[0]["note"] == "revenue corrected"


def test_discard_drops_the_audit_area(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    pending = p.backfill(
        p.plan("fct_daily_sales", "2026-08-01", "2026-08-03", as_of=AS_OF), reason="not run yet"
    )
    with pytest.raises(backfill.InvalidInputError, match="2 of 2 task\\(s\\) not done"):
        pending.audit()
    with pytest.raises(backfill.InvalidInputError, match="only a finished"):
        pending.publish(note="n")
    bf = run_fix(shop_dir, "2026-08-01", "2026-08-03", allow_overlap="the pending one is a test")
    with pytest.raises(backfill.ConflictError, match="has not been audited"):
        bf.publish(note="n")
    schema = audit_schema(bf.id)
    assert query(
        shop_dir, f"SELECT count(*) FROM duckdb_tables() WHERE schema_name='{schema}'"
    ) == [(3,)]
    r = cli("discard", bf.id, "--project", str(shop_dir))
    assert r.returncode == 0, r.stderr
    assert query(
        shop_dir, f"SELECT count(*) FROM duckdb_schemas() WHERE schema_name='{schema}'"
    ) == [(0,)]
    reopened = backfill.Backfill.open(bf.id, project=shop_dir)
    assert reopened.status().status == "discarded"
    with pytest.raises(backfill.InvalidInputError, match="discarded"):
        reopened.audit()


def test_audit_and_publish_cli(shop_dir: Path) -> None:
    bf = run_fix(shop_dir, "2026-08-01", "2026-08-03")
    r = cli("audit", "--project", str(shop_dir), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["backfill_id"] == bf.id and out["passed"]
    r = cli(
        "audit", "--project", str(shop_dir), "--gates", "{fct_daily_sales: [{removed_rows: -1}]}"
    )
    assert r.returncode == 2 and "removed_rows: -1" in r.stderr
    r = cli("audit", "--project", str(shop_dir), "--gates", "{nope: [{removed_rows: 0}]}")
    assert r.returncode == 2 and "'nope' is not a model of this backfill" in r.stderr
    r = cli(
        "audit",
        "--project",
        str(shop_dir),
        "--gates",
        "{fct_sales_7d: [{unchanged: [revenue_7d]}]}",
    )
    assert r.returncode == 1 and "FAIL fct_sales_7d: unchanged: revenue_7d" in r.stdout
    r = cli("publish", "--project", str(shop_dir), "--note", "n")  # latest audit failed a gate
    assert r.returncode == 1
    r = cli(
        "diff",
        "main.fct_daily_sales",
        f"{audit_schema(bf.id)}.fct_daily_sales",
        "--key",
        "sales_date",
        "--partition-by",
        "sales_date",
        "--project",
        str(shop_dir),
    )
    assert r.returncode == 1 and "changed columns: revenue 2" in r.stdout, r.stdout + r.stderr
    assert cli("audit", "--project", str(shop_dir)).returncode == 0
    r = cli("publish", "--project", str(shop_dir), "--note", "fixed", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["published"]
    r = cli("publish", "--project", str(shop_dir), "--note", "again")
    assert r.returncode == 2 and "published" in r.stderr


# -- gates ----------------------------------------------------------------------------------------
def _facts(**kw: Any) -> ModelFacts:
    base: dict[str, Any] = {
        "totals": {"revenue": (100.0, 98.0)},
        "added": 0,
        "removed": 0,
        "changed": 3,
        "changed_per_partition": {"a": 1, "b": 2},
        "column_changes": {"x": 3},
        "schema_changes": [],
        "columns": ["x", "revenue"],
    }
    base.update(kw)
    return ModelFacts(**base)


@pytest.mark.parametrize(
    "spec, passed",
    [
        ({"measure": "revenue", "change": ["-5%", "0%"]}, True),
        ({"measure": "revenue", "change": ["-1%", "0%"]}, False),
        ({"measure": "revenue", "change": [-2, 0]}, True),
        ({"measure": "revenue", "change": [-1.5, 0]}, False),
        ({"measure": "nope", "change": ["-1%", "1%"]}, False),
        ({"removed_rows": 0}, True),
        ({"changed_rows": 2}, False),
        ({"changed_rows_per_partition": 2}, True),
        ({"changed_rows_per_partition": 1}, False),
        ({"unchanged": ["x"]}, False),
        ({"unchanged": "revenue"}, True),
        ({"schema_change": False}, True),
    ],
)
def test_gates(spec: dict[str, Any], passed: bool) -> None:
    (gate,) = parse_gates({"m": [spec]}, ["m"])["m"]
    result = evaluate(gate, _facts())
    assert result.passed is passed, result
    assert result.reason


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"m": [{"measure": "revenue", "change": ["-5%"]}]}, "must be \\[low, high\\]"),
        ({"m": [{"measure": "revenue", "change": ["1%", "-1%"]}]}, "low > high"),
        ({"m": [{"measure": "revenue", "change": ["a%", "1%"]}]}, "'a%' is not a bound"),
        ({"m": [{"removed_rows": True}]}, "not a row count"),
        ({"m": [{"bogus": 1}]}, "unknown gate 'bogus'"),
        ({"x": [{"removed_rows": 0}]}, "'x' is not a model"),
        ({"m": "removed_rows"}, "not a list of gates"),
    ],
)
def test_bad_gates_name_the_value(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(backfill.InvalidInputError, match=message):
        parse_gates(spec, ["m"])


# -- estimate and check ---------------------------------------------------------------------------
def test_estimate_times_one_sample_partition_per_model(shop_dir: Path) -> None:
    p = backfill.Project.load(shop_dir)
    plan = p.plan("fct_daily_sales+", "2026-08-01", "2026-10-29", as_of=AS_OF)
    before = query(shop_dir, "SELECT schema_name FROM duckdb_schemas() ORDER BY 1")
    report = estimate(p, plan, concurrency=10)
    assert [s.model for s in report.samples] == [
        m for m in p.topological_order() if m in {x.model for x in plan.models}
    ]
    daily = next(s for s in report.samples if s.model == "fct_daily_sales")
    assert (daily.label, daily.partitions, daily.rows) == ("2026-08-01", 89, 1)
    assert all(s.seconds > 0 for s in report.samples)
    same = plan.estimate(costs={s.model: s.seconds for s in report.samples}, concurrency=10)
    assert report.makespan == pytest.approx(same.makespan)
    text = str(report)
    assert "fct_daily_sales: one day (2026-08-01) took" in text and "89 days to rebuild" in text
    assert "fct_monthly_sales: one month (2026-08) took" in text
    assert "at 10 concurrent ≈" in text
    # scratch dropped, published untouched
    assert query(shop_dir, "SELECT schema_name FROM duckdb_schemas() ORDER BY 1") == before
    r = cli(
        "estimate",
        "--project",
        str(shop_dir),
        "--select",
        "fct_daily_sales+",
        "--start",
        "2026-08-01",
        "--end",
        "2026-10-29",
        "--as-of",
        AS_OF,
        "--concurrency",
        "10",
    )
    assert r.returncode == 0, r.stderr
    assert "one day (2026-08-01) took" in r.stdout and "at 10 concurrent ≈" in r.stdout
    r = cli(
        "estimate",
        "--project",
        str(shop_dir),
        "--select",
        "fct_daily_sales+",
        "--start",
        "2026-08-01",
        "--end",
        "2026-10-29",
        "--as-of",
        AS_OF,
        "--json",
    )
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["concurrency"] == 4 and out["makespan_seconds"] > 0
    assert [s["partitions"] for s in out["samples"]] == [89, 3, 95]
    r = cli(
        "estimate",
        "--project",
        str(shop_dir),
        "--select",
        "nope",
        "--start",
        "2026-08-01",
        "--end",
        "2026-10-29",
    )
    assert r.returncode == 2 and "nope" in r.stderr


def test_check_names_the_column_that_reads_the_clock(shop_dir: Path) -> None:
    (shop_dir / "models" / "fct_daily_loaded.sql").write_text(
        '{{ config(event_time="sales_date") }}\n'
        "select sales_date, revenue, now() as loaded_at\n"
        'from {{ ref("fct_daily_sales") }}\n'
        "where sales_date >= {{ start }} and sales_date < {{ end }}\n"
    )
    p = backfill.Project.load(shop_dir)
    report = check_run_twice(p, "fct_daily_loaded", "2026-08-03")
    assert not report.deterministic and not report.ok
    assert report.differing_columns == ["loaded_at"]
    assert report.diff is not None and report.diff.changed_columns() == {"loaded_at": 1}
    assert "CLOCK_READ" in report.findings.codes()
    assert "loaded_at" in str(report)
    r = cli("check", "fct_daily_loaded", "--partition", "2026-08-03", "--project", str(shop_dir))
    assert r.returncode == 1 and "columns that differ between runs: loaded_at" in r.stdout
    r = cli(
        "check",
        "fct_daily_sales",
        "--partition",
        "2026-08-03",
        "--project",
        str(shop_dir),
        "--json",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["deterministic"] and out["differing_columns"] == []
    r = cli("check", "fct_daily_sales", "--partition", "someday", "--project", str(shop_dir))
    assert r.returncode == 2 and "'someday'" in r.stderr
    assert query(
        shop_dir, "SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE 'audit_scratch%'"
    ) == [(0,)]


def test_diff_cli_on_files(tmp_path: Path) -> None:
    c = duckdb.connect()
    c.execute(
        f"COPY (SELECT range AS id, range * 2 AS v FROM range(10)) TO '{tmp_path / 'old.parquet'}'"
    )
    c.execute(
        f"COPY (SELECT range AS id, CASE WHEN range = 3 THEN 0 ELSE range * 2 END AS v "
        f"FROM range(10)) TO '{tmp_path / 'new.parquet'}'"
    )
    c.close()
    r = cli("diff", str(tmp_path / "old.parquet"), str(tmp_path / "new.parquet"), "--key", "id")
    assert r.returncode == 1 and "changed columns: v 1" in r.stdout
    r = cli(
        "diff",
        str(tmp_path / "old.parquet"),
        str(tmp_path / "old.parquet"),
        "--key",
        "id",
        "--json",
    )
    assert r.returncode == 0 and json.loads(r.stdout)["summary"]["identical"]
