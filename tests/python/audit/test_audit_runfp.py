"""The audit takes the audit area's fingerprints from the run: each task records the fingerprint
of every partition it wrote, the audit uses them instead of scanning the area, and publish still
refuses an area that changed after the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import backfill
from backfill.audit import audit_model
from backfill.engines import PartitionFingerprint, WriteResult, recorded_partitions
from backfill.engines.duckdb import audit_schema
from backfill.examples import shop
from shop_support import AS_OF, copy_built

MODEL = "fct_daily_sales"


@pytest.fixture
def shop_dir(built_shop: Path, tmp_path: Path) -> Path:
    dest = copy_built(built_shop, tmp_path / "shop")
    shop.fix(dest)
    return dest


def run_fix(root: Path, start: str, end: str, per_task: int) -> Any:
    p = backfill.Project.load(root)
    bf = p.backfill(
        p.plan(f"{MODEL}+", start, end, as_of=AS_OF, partitions_per_run=per_task),
        reason="discount bug fixed",
    )
    assert bf.run(concurrency=2).ok
    return bf


def scanned(bf: Any, model: str) -> dict[str, PartitionFingerprint]:
    """The oracle: the area's fingerprints per partition, scanned now."""
    return bf.engine.fingerprints(bf.project, model, bf.area, bf.partitions()[model])


def test_recorded_fingerprints_round_trip_and_reject_what_is_not_theirs() -> None:
    a, b = PartitionFingerprint.of(2, 5), PartitionFingerprint.of(3, 7)
    res = WriteResult(
        5, 0, PartitionFingerprint.total([a, b]), 0.1, partitions={"2026-08-01": a, "2026-08-02": b}
    )
    text = res.recorded_fingerprint()
    assert text.split(" ")[0] == str(res.fingerprint) == "5:000000000000000c"
    assert recorded_partitions(text) == {"2026-08-01": a, "2026-08-02": b}
    # A plain fingerprint (another engine, an older run) lists none: the audit scans.
    plain = WriteResult(5, 0, res.fingerprint, 0.1)
    assert plain.recorded_fingerprint() == str(res.fingerprint)
    for bad in (
        None,
        "",
        str(res.fingerprint),
        text.replace("5:", "6:", 1),
        text + " 2026-08-01=2:0000000000000005",
        text.replace("=", ":"),
    ):
        assert recorded_partitions(bad) is None, bad


def test_the_run_records_each_partition_and_the_audit_agrees_with_a_scan(shop_dir: Path) -> None:
    bf = run_fix(shop_dir, "2026-08-01", "2026-08-11", per_task=4)
    tasks = [t for t in bf.ledger.tasks(bf.id) if t.model == MODEL]
    assert max(t.partitions for t in tasks) == 4  # multi-partition tasks are on this path
    recorded: dict[str, PartitionFingerprint] = {}
    for t in tasks:
        assert t.fingerprint is not None
        fps = t.fingerprint.partitions
        assert fps is not None and len(fps) == t.partitions
        recorded.update(fps)
    truth = scanned(bf, MODEL)
    assert recorded == truth and len(truth) == 10
    a = bf.audit()[MODEL]
    assert a.audit_fingerprints == truth
    assert a.to_dict()["audit_fingerprints"] == {k: str(v) for k, v in truth.items()}
    # The same result as an audit that scans the area (given no run fingerprints).
    rescanned = audit_model(bf.engine, bf.project, bf.id, bf.area, MODEL, bf.partitions()[MODEL])
    bf.engine.close()
    assert rescanned.to_dict() == {**a.to_dict(), "gates": []}
    assert not all(p.identical for p in a.partitions)
    assert bf.publish(note="fix").models[MODEL]


def test_publish_refuses_an_area_changed_after_the_run_even_when_the_audit_missed_it(
    shop_dir: Path,
) -> None:
    bf = run_fix(shop_dir, "2026-08-01", "2026-08-07", per_task=3)
    # Someone edits the area between the run and the audit: the audit trusts the run's
    # fingerprints, so it does not see it; publish re-checks the area and refuses.
    with bf.engine.connect() as cur:
        cur.execute(
            f"DELETE FROM {audit_schema(bf.id)}.{MODEL} WHERE sales_date = DATE '2026-08-02'"
        )
    bf.engine.close()
    recorded = bf.audit()[MODEL].audit_fingerprints
    assert recorded["2026-08-02"] != scanned(bf, MODEL)["2026-08-02"]
    bf.engine.close()
    with pytest.raises(backfill.ConflictError, match=f"audit area of {MODEL} changed"):
        bf.publish(note="fix", force_reason="past the gates: the area check is tested")


@pytest.mark.parametrize("kind", ["TIMESTAMP", "TIMESTAMPTZ", "DATE"])
@pytest.mark.parametrize(
    "grain,tz,first",
    [
        ("day", "UTC", "1969-12-29"),  # before and across the epoch
        ("day", "Europe/Berlin", "2026-10-23"),  # a 25-hour day: hour buckets
        ("hour", "Asia/Kathmandu", "2026-03-01T03:00"),  # +05:45: minute buckets
        ("week", "UTC", "2026-01-05"),
    ],
)
def test_one_scan_per_partition_equals_a_filtered_scan_of_each(
    kind: str, grain: str, tz: str, first: str
) -> None:
    """fingerprint_parts (integer buckets, sums from the same scan) against the oracle: one
    fingerprint_where and one sum per partition."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    import duckdb

    from backfill.calendar import partitions
    from backfill.engines.duckdb.sql import DIALECT, fingerprint_parts_sums
    from backfill.engines.sql.core import fingerprint_parts, fingerprint_where

    zone = ZoneInfo(tz)
    start = dt.datetime.fromisoformat(first).replace(tzinfo=zone)
    end = start + dt.timedelta(days=3 if grain in ("day", "hour") else 21)
    if grain == "hour":
        end = start + dt.timedelta(hours=5)
    parts = [(p.label, p.start, p.end) for p in partitions(grain, start, end, tz=tz)]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    lo = start.astimezone(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(hours=30)
    span = int((end - start).total_seconds()) + 60 * 3600
    con.execute(
        f"CREATE TABLE t AS SELECT i AS id, (i % 7) * 1.25 AS x, "
        f"CAST(i % 5 AS DECIMAL(9, 2)) AS amount, "
        f"CAST(TIMESTAMP '{lo:%Y-%m-%d %H:%M:%S}' + to_seconds(i * 977 % {span}) "
        f"AS {kind}) AS at FROM range(4000) r(i)"
    )
    names = ["id", "x", "amount", "at"]

    def run(sql: str) -> list[tuple[object, ...]]:
        return con.execute(sql).fetchall()

    fps, totals = fingerprint_parts_sums(con, "t", "at", parts, names, ["id", "amount"])
    assert fps == fingerprint_parts(DIALECT, run, "t", names, ("at", None), parts)
    for label, s, e in parts:
        where = DIALECT.in_periods("at", [(s, e)])
        assert fps[label] == fingerprint_where(DIALECT, run, "t", names, where)
    assert sum(fp.rows for fp in fps.values()) > 0
    where = DIALECT.in_periods("at", [(s, e) for _, s, e in parts])
    assert totals == list(
        con.execute(f"SELECT sum(id), sum(amount) FROM t WHERE {where}").fetchone() or ()
    )
