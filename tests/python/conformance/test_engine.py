"""The Engine conformance suite: what every engine must do, run against every engine
(``engine_cases.ENGINES``) on the shop and its discount bug.

The Engine interface is defined by these tests as much as by its signatures: idempotent task
writes, audit areas that readers never see, ``ref()`` reading the backfill's new rows for its
periods and the published rows elsewhere, fingerprints that do not depend on row order, audit
counts that match a brute-force comparison, publish that a concurrent reader sees all at once
(where the engine declares ``atomic_publish``), refusal of a stale audit, and discard.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from engine_cases import AS_OF, WATCHED, Case, day, seen_during

import backfill
from backfill.engines import (
    PUBLISHED,
    Area,
    Capabilities,
    PartitionFingerprint,
    recorded_partitions,
)

# Days after the fix day (2026-08-01) inside both shops' data: the fix lowers their revenue.
START, END = "2026-08-03", "2026-08-07"
DAYS = [(f"2026-08-0{d}", day(f"2026-08-0{d}"), day(f"2026-08-0{d + 1}")) for d in range(3, 7)]


def rows(
    case: Case, model: str, area: Area, periods: list[tuple[dt.datetime, dt.datetime]] | None = None
) -> list[dict[str, Any]]:
    """The rows of ``model`` in ``area`` as dicts, read through the engine's Arrow stream."""
    with case.engine.stream(case.project, model, area, periods) as stream:
        return backfill.ArrowTable.from_arrow(stream).to_pylist()


def by_date(rs: list[dict[str, Any]], key: str = "sales_date") -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in rs}


def backfill_fix(case: Case, start: str = START, end: str = END) -> backfill.Backfill:
    """The fix, run into a new audit area for [start, end) and everything downstream."""
    case.apply_fix()
    plan = case.project.plan("fct_daily_sales+", start, end, as_of=AS_OF)
    bf = case.project.backfill(plan, reason="discount bug fixed", engine=case.engine)
    status = bf.run(concurrency=2, backoff=0.0)
    assert status.ok, str(status)
    return bf


def test_declares_its_capabilities(case: Case) -> None:
    caps = case.engine.capabilities
    assert isinstance(caps, Capabilities)
    assert isinstance(caps.atomic_publish, bool) and isinstance(caps.embedded, bool)


def test_a_task_written_twice_leaves_the_same_rows(case: Case) -> None:
    label, s, e = DAYS[0]
    area = Area("bf_conformance_twice", {"fct_daily_sales": [(s, e)]})
    first = case.engine.run_task(case.project, "fct_daily_sales", s, e, area)
    once = rows(case, "fct_daily_sales", area)
    second = case.engine.run_task(case.project, "fct_daily_sales", s, e, area)
    assert first.fingerprint == second.fingerprint
    assert isinstance(first.fingerprint, PartitionFingerprint) and first.fingerprint.rows == 1
    assert second.rows_written == first.rows_written == 1 and second.rows_deleted == 1
    assert rows(case, "fct_daily_sales", area) == once
    assert case.engine.fingerprints(case.project, "fct_daily_sales", area, [DAYS[0]]) == {
        label: first.fingerprint
    }
    case.engine.drop_area("bf_conformance_twice")


def test_an_audit_area_is_invisible_to_readers_of_the_published_tables(case: Case) -> None:
    models = ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]
    before = {m: case.engine.fingerprints(case.project, m, PUBLISHED, []) for m in models}
    bf = backfill_fix(case)
    after = {m: case.engine.fingerprints(case.project, m, PUBLISHED, []) for m in models}
    assert after == before
    # the area holds the backfilled days of the daily model and nothing else
    area_days = case.engine.fingerprints(
        case.project,
        "fct_daily_sales",
        bf.area,
        [
            ("2026-08-02", day("2026-08-02"), day("2026-08-03")),
            *DAYS,
            ("2026-08-07", day("2026-08-07"), day("2026-08-08")),
        ],
    )
    assert [fp.rows for fp in area_days.values()] == [0, 1, 1, 1, 1, 0]
    published_days = case.engine.fingerprints(case.project, "fct_daily_sales", PUBLISHED, DAYS)
    assert all(area_days[label] != published_days[label] for label, _, _ in DAYS)  # the fix


def test_ref_reads_new_rows_in_the_backfilled_periods_and_published_rows_elsewhere(
    case: Case,
) -> None:
    bf = backfill_fix(case)
    new_daily = by_date(rows(case, "fct_daily_sales", bf.area))
    old_daily = by_date(rows(case, "fct_daily_sales", PUBLISHED))
    assert set(new_daily) == {dt.date(2026, 8, d) for d in range(3, 7)}
    merged = {**old_daily, **new_daily}  # what ref() must see
    rolling = rows(case, "fct_sales_7d", bf.area)
    assert rolling, "the 7-day model was rebuilt"
    for r in rolling:
        window = [
            merged[r["sales_date"] - dt.timedelta(days=k)]
            for k in range(7)
            if r["sales_date"] - dt.timedelta(days=k) in merged
        ]
        assert r["revenue_7d"] == sum((w["revenue"] for w in window), Decimal(0)), r
        assert r["days_in_window"] == len(window)
    # a rolling day inside the backfill reads new days; one far after it reads published ones
    inside = [r for r in rolling if dt.date(2026, 8, 3) <= r["sales_date"] <= dt.date(2026, 8, 6)]
    assert inside
    old_rolling = by_date(rows(case, "fct_sales_7d", PUBLISHED))
    assert all(r["revenue_7d"] < old_rolling[r["sales_date"]]["revenue_7d"] for r in inside)
    month = rows(case, "fct_monthly_sales", bf.area)
    assert len(month) == 1
    august = [d for k, d in merged.items() if k.month == 8]
    assert month[0]["revenue"] == sum((d["revenue"] for d in august), Decimal(0))


def test_fingerprints_do_not_depend_on_row_order(case: Case) -> None:
    label, s, e = DAYS[1]
    area1 = Area("bf_conformance_order1", {"clean_orders": [(s, e)]})
    first = case.engine.run_task(case.project, "clean_orders", s, e, area1)
    head = case.first_rows("orders")
    case.reverse_raw("orders")
    assert case.first_rows("orders") != head  # the raw rows are stored the other way round now
    area2 = Area("bf_conformance_order2", {"clean_orders": [(s, e)]})
    second = case.engine.run_task(case.project, "clean_orders", s, e, area2)
    assert first.fingerprint == second.fingerprint and first.fingerprint.rows > 1
    fps = [
        case.engine.fingerprints(case.project, "clean_orders", a, [DAYS[1]])[label]
        for a in (area1, area2)
    ]
    assert fps[0] == fps[1] == first.fingerprint
    for a in (area1, area2):
        case.engine.drop_area(str(a.backfill_id))


def test_a_tasks_partition_fingerprints_and_scoped_answers_equal_the_tables(case: Case) -> None:
    """What the audit may take instead of asking the tables: the fingerprint per partition a
    task records (when the engine computes them) and the answers inside ``audit_scope``."""
    model, periods = "fct_daily_sales", [(s, e) for _, s, e in DAYS]
    area = Area("bf_conformance_parts", {model: periods})
    res = case.engine.run_task(case.project, model, DAYS[0][1], DAYS[-1][2], area)
    if res.partitions is not None:
        assert dict(res.partitions) == case.engine.fingerprints(case.project, model, area, DAYS)
        assert PartitionFingerprint.total(res.partitions.values()) == res.fingerprint
    assert recorded_partitions(res.recorded_fingerprint()) == (
        dict(res.partitions) if res.partitions else None
    )
    measures = ["revenue", "orders"]
    for a in (PUBLISHED, area):
        plain = (
            case.engine.fingerprints(case.project, model, a, DAYS),
            case.engine.measure_sums(case.project, model, a, measures, periods),
        )
        with case.engine.audit_scope(case.project, model, [PUBLISHED, area], DAYS, measures, []):
            scoped = (
                case.engine.fingerprints(case.project, model, a, DAYS),
                case.engine.measure_sums(case.project, model, a, measures, periods),
            )
        assert scoped == plain and plain[1]["revenue"] is not None
    case.engine.drop_area(str(area.backfill_id))


def test_audit_counts_match_a_brute_force_comparison(case: Case) -> None:
    bf = backfill_fix(case)
    report = bf.audit()
    daily = report["fct_daily_sales"]
    old = by_date(rows(case, "fct_daily_sales", PUBLISHED, [(s, e) for _, s, e in DAYS]))
    new = by_date(rows(case, "fct_daily_sales", bf.area))
    changed = {k for k in old.keys() & new.keys() if old[k] != new[k]}
    for p in daily.partitions:
        k = dt.date.fromisoformat(p.label)
        assert (p.rows_old, p.rows_new) == (int(k in old), int(k in new))
        assert p.changed == int(k in changed) and p.added == int(k in new and k not in old)
        assert p.identical == (k not in changed)
    assert daily.diff is not None and daily.diff.summary.changed == len(changed) == 4
    old_total = sum((r["revenue"] for r in old.values()), Decimal(0))
    new_total = sum((r["revenue"] for r in new.values()), Decimal(0))
    # Exact: the engine sums DECIMAL revenue as a decimal, every digit (no binary float).
    assert daily.totals["revenue"] == (old_total, new_total)
    assert all(isinstance(v, Decimal) for v in daily.totals["revenue"])
    assert isinstance(daily.totals["orders"][0], int)
    for p in daily.differing:
        k = dt.date.fromisoformat(p.label)
        assert p.measures["revenue"][2] == new[k]["revenue"] - old[k]["revenue"]
    assert daily.changed_columns == {"revenue": 4}


def test_an_audit_against_a_copy_elsewhere_finds_exactly_its_differences(
    case: Case, tmp_path: Path
) -> None:
    """``audit(against=...)``: the audit area (on Spark, the backfill's branch, pinned to its
    snapshot) compared with a Parquet copy of it in which one day's revenue differs and one day
    is missing; the published tables play no part."""
    import pyarrow.parquet as pq

    bf = backfill_fix(case)
    new = sorted(rows(case, "fct_daily_sales", bf.area), key=lambda r: r["sales_date"])
    assert [r["sales_date"].isoformat() for r in new] == [label for label, _, _ in DAYS]
    old = [dict(r) for r in new if r["sales_date"].isoformat() != "2026-08-05"]
    old[0]["revenue"] += Decimal("10.00")
    copy = tmp_path / "old_system.parquet"
    pq.write_table(_arrow(old), copy)
    report = bf.audit(against={"fct_daily_sales": str(copy)})
    daily = report["fct_daily_sales"]
    assert daily.against == str(copy) and [p.label for p in daily.partitions] == [
        label for label, _, _ in DAYS
    ]
    differing = {p.label: p for p in daily.differing}
    assert set(differing) == {"2026-08-03", "2026-08-05"}
    assert differing["2026-08-03"].changed == 1 and differing["2026-08-05"].added == 1
    assert daily.changed_columns == {"revenue": 1}
    total = sum((r["revenue"] for r in new), Decimal(0))
    assert daily.totals["revenue"] == (total + Decimal("10.00") - new[2]["revenue"], total)
    assert not report.recorded and bf.ledger.audits(bf.id) == []


def test_publish_is_seen_all_at_once_by_a_concurrent_reader(case: Case) -> None:
    bf = backfill_fix(case)
    assert bf.audit().passed
    old = case.snapshot_sums(WATCHED)
    seen = seen_during(case, lambda: bf.publish("revenue from 3 Aug about 2% lower"))
    new = case.snapshot_sums(WATCHED)
    assert all(a != b for a, b in zip(old, new, strict=False))  # every model changed
    if case.engine.capabilities.atomic_publish:
        mixed = [s for s in seen if s not in (old, new)]
        assert not mixed, f"a reader saw a half-published state: {mixed[:3]}"


def test_a_stale_audit_is_refused_and_nothing_is_swapped(case: Case) -> None:
    first = backfill_fix(case)
    assert first.audit().passed
    # someone else publishes over an overlapping period after our audit
    plan = case.project.plan("fct_daily_sales+", "2026-08-05", "2026-08-09", as_of=AS_OF)
    other = case.project.backfill(
        plan,
        reason="another fix",
        engine=case.engine,
        allow_overlap="racing the first backfill's publish",
    )
    assert other.run(concurrency=2, backoff=0.0).ok
    other.audit()
    other.publish("their publication")
    published = case.engine.fingerprints(case.project, "fct_daily_sales", PUBLISHED, [])
    with pytest.raises(backfill.ConflictError, match="changed since the audit"):
        first.publish("ours")
    assert case.engine.fingerprints(case.project, "fct_daily_sales", PUBLISHED, []) == published
    assert first.status().status == "done"  # not published; re-audit and try again
    report = first.audit()
    first.publish("ours, re-audited")
    entries = case.project.changelog().publications()
    assert [e["backfill_id"] for e in entries][:2] == [first.id, other.id]
    # The changelog keeps the audit's totals exactly, and its top partitions.
    old_total, new_total = report["fct_daily_sales"].totals["revenue"]
    t = entries[0]["models"]["fct_daily_sales"]["totals"]["revenue"]
    assert (t["old"], t["new"], t["delta"]) == (old_total, new_total, new_total - old_total)
    assert str(t["delta"]) == str(new_total - old_total)  # at the column's scale
    assert [
        m["partition"] for m in entries[0]["models"]["fct_daily_sales"]["top_partitions"]["revenue"]
    ] == [p.label for p, _ in report["fct_daily_sales"].top_partitions("revenue")]


def test_discard_drops_the_area_and_keeps_the_published_tables(case: Case) -> None:
    before = case.engine.fingerprints(case.project, "fct_daily_sales", PUBLISHED, [])
    bf = backfill_fix(case)
    assert case.engine.columns(case.project, "fct_daily_sales", bf.area) is not None
    bf.discard()
    for model in ("fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"):
        assert case.engine.columns(case.project, model, bf.area) is None
    assert case.engine.fingerprints(case.project, "fct_daily_sales", PUBLISHED, []) == before
    assert bf.status().status == "discarded"
    with pytest.raises(backfill.ConflictError):
        bf.ledger.set_status(bf.id, "running")  # discarded is final


def test_a_publish_without_models_appends_only_changelog_rows(case: Case) -> None:
    # Forward-only changes and delivery records are such publishes (backfill.publish.forward).
    from backfill.engines import PublishRequest
    from backfill.publish import forward_change
    from backfill.publish.changelog import delivery_row

    before = case.engine.fingerprints(case.project, "fct_daily_sales", PUBLISHED, [])
    change = forward_change(
        case.project,
        "fct_daily_sales",
        "2026-12-01",
        "new column meaningful from today",
        engine=case.engine,
    )
    when = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    case.engine.publish(
        case.project,
        PublishRequest(
            change.id,
            Area(change.id),
            (),
            (
                delivery_row(
                    change.id,
                    None,
                    when,
                    "tester",
                    "webhook",
                    "finance",
                    False,
                    "to http://x after 3 attempt(s): HTTP 500",
                ),
            ),
        ),
    )
    assert case.engine.fingerprints(case.project, "fct_daily_sales", PUBLISHED, []) == before
    [entry] = [e for e in case.project.changelog().publications() if e["kind"] == "forward"]
    assert entry["publication_id"] == change.id and entry["backfill_id"] is None
    assert list(entry["models"]) == ["fct_daily_sales"]
    assert str(entry["models"]["fct_daily_sales"]["period"][0])[:10] == "2026-12-01"
    assert [(d["channel"], d["consumer"], d["ok"]) for d in entry["deliveries"]] == [
        ("webhook", "finance", False)
    ]


# The changelog table as the first versions created it (measure values as binary floats, no
# value_type), in the engines that keep such tables: publish upgrades it in place.
_OLD_CHANGELOG_TYPES = {
    "duckdb": ("VARCHAR", "TIMESTAMPTZ", "BIGINT", "DOUBLE"),
    "postgres": ("text", "timestamptz", "bigint", "double precision"),
}


@pytest.mark.parametrize("case", sorted(_OLD_CHANGELOG_TYPES), indirect=True)
def test_a_changelog_table_of_an_earlier_version_is_upgraded(case: Case) -> None:
    from backfill.engines import CHANGELOG_COLUMNS, CHANGELOG_TABLE, ColumnKind, PublishRequest
    from backfill.publish.changelog import delivery_row, forward_row

    text, ts, integer, double = _OLD_CHANGELOG_TYPES[case.name]
    kinds = {
        ColumnKind.STRING: text,
        ColumnKind.TIMESTAMP_TZ: ts,
        ColumnKind.INTEGER: integer,
        ColumnKind.FLOAT: double,
        ColumnKind.DECIMAL: double,
    }
    old_columns = [(n, k) for n, k in CHANGELOG_COLUMNS if n != "value_type"]
    table = f'"{case.engine.schema}".{CHANGELOG_TABLE}'  # type: ignore[attr-defined]
    when = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    with case.engine.connect() as cur:  # type: ignore[attr-defined]
        cur.execute(
            f"CREATE TABLE {table} (" + ", ".join(f'"{n}" {kinds[k]}' for n, k in old_columns) + ")"
        )
        cur.execute(
            f"INSERT INTO {table} VALUES ("
            + ", ".join(
                [
                    "'pub_old'",
                    "'bf_old'",
                    "TIMESTAMPTZ '2029-01-01 00:00:00+00'",
                    "'me'",
                    "'r'",
                    "'n'",
                    "NULL",
                    "'fct_daily_sales'",
                    "NULL",
                    "NULL",
                    "NULL",
                    "1",
                    *["NULL"] * 5,
                    "'revenue'",
                    "100.25",
                    "99.5",
                    "-0.75",
                    "-0.748",
                ]
            )
            + ")"
        )
    exact = forward_row("fwd_new", when, "tester", "r", "n", "fct_daily_sales", when)
    exact = (
        *exact[:17],
        "revenue",
        Decimal("1234567890123.45"),
        Decimal("1234567890123.46"),
        Decimal("0.01"),
        None,
        "decimal(38,2)",
    )
    case.engine.publish(
        case.project,
        PublishRequest(
            "fwd_new",
            Area("fwd_new"),
            (),
            (exact, delivery_row("fwd_new", None, when, "tester", "webhook", "x", True, "ok")),
        ),
    )
    rows = {r[0]: r for r in case.engine.changelog_rows(case.project, None) if r[17]}
    assert rows["fwd_new"][18:23] == (
        Decimal("1234567890123.45"),
        Decimal("1234567890123.46"),
        Decimal("0.01"),
        None,
        "decimal(38,2)",
    )
    assert rows["pub_old"][18:23] == (
        Decimal("100.25"),
        Decimal("99.5"),
        Decimal("-0.75"),
        pytest.approx(-0.748),
        None,
    )


# -- landing (Kafka sources' rows handed over as Arrow) and reading warehouse tables ------------
def _arrow(rs: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    return pa.Table.from_pylist(rs)


def _dead_letters(topic: str, at: dt.datetime, n: int) -> Any:
    import pyarrow as pa

    from backfill.integrations.kafka.landing import dead_letter_schema

    naive = at.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return pa.table(
        [
            pa.array([topic] * n, pa.string()),
            pa.array([0] * n, pa.int32()),
            pa.array(list(range(n)), pa.int64()),
            pa.array([naive + dt.timedelta(minutes=i) for i in range(n)], pa.timestamp("us")),
            pa.array([b"k"] * n, pa.binary()),
            pa.array([b"not json"] * n, pa.binary()),
            pa.array(["not JSON"] * n, pa.string()),
        ],
        schema=dead_letter_schema(),
    )


def test_landed_rows_replace_their_period_like_a_task(case: Case) -> None:
    """Engine.land (what a Kafka landing task calls) on every engine: the rows replace the
    period in the area, twice leaves the same table, rows outside the period fail the task, and
    the period's dead letters replace those of their topic in the published table."""
    from backfill.engines import DeadLetters, TaskFailure

    if case.name == "dbt-duckdb":
        pytest.skip("dbt writes models through dbt; landing models are not dbt nodes")
    label, s, e = DAYS[0]
    published = rows(case, "fct_daily_sales", PUBLISHED, [(s, e)])
    assert len(published) == 1
    landed = [{**published[0], "orders": 424242}]
    area = Area("bf_conformance_land", {"fct_daily_sales": [(s, e)]})
    dead = DeadLetters("conformance_dead_letters", "orders", _dead_letters("orders", s, 2))
    first = case.engine.land(case.project, "fct_daily_sales", s, e, area, _arrow(landed), dead)
    second = case.engine.land(case.project, "fct_daily_sales", s, e, area, _arrow(landed), dead)
    assert first.rows_written == second.rows_written == 1 and second.rows_deleted == 1
    assert first.fingerprint == second.fingerprint
    [got] = rows(case, "fct_daily_sales", area)
    assert got["orders"] == 424242 and got["sales_date"] == published[0]["sales_date"]
    assert case.engine.fingerprints(case.project, "fct_daily_sales", area, [DAYS[0]]) == {
        label: first.fingerprint
    }
    # the dead letters: the period's two, once, whatever ran twice
    with case.engine.table_rows(case.engine.schema, "conformance_dead_letters") as stream:  # type: ignore[attr-defined]
        letters = backfill.ArrowTable.from_arrow(stream).to_pylist()
    assert sorted(r["offset"] for r in letters) == [0, 1]
    # a row outside the task's period fails it, permanently, and changes nothing
    late = [{**landed[0], "sales_date": DAYS[1][1].date()}]
    with pytest.raises(TaskFailure) as failed:
        case.engine.land(case.project, "fct_daily_sales", s, e, area, _arrow(late))
    assert not failed.value.transient
    assert rows(case, "fct_daily_sales", area) == [got]
    case.engine.drop_area("bf_conformance_land")


def test_diff_reads_tables_of_the_warehouse_through_the_engine(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``backfill diff schema.table FILE`` reads the table through the project's engine."""
    import json

    import pyarrow.parquet as pq

    from backfill.cli import main

    bf = backfill_fix(case)
    warehouse = getattr(case.engine, "warehouse", case.engine)
    schema, table = warehouse.published(case.project, "fct_daily_sales")
    new = tmp_path / "new.parquet"
    pq.write_table(_arrow(rows(case, "fct_daily_sales", bf.area)), new)
    where = ["--project", str(case.root)]
    capsys.readouterr()
    code = main(["diff", f"{schema}.{table}", str(new), "--key", "sales_date", "--json", *where])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and "revenue" in out["changed_columns"]
    assert out["summary"]["changed"] == 4
    code = main(["diff", f"{schema}.{table}", f"{schema}.{table}", "--key", "sales_date", *where])
    assert code == 0
    capsys.readouterr()
    assert main(["diff", f"{schema}.no_such_table", str(new), "--key", "k", *where]) == 2
