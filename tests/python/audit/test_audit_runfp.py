"""The audit takes the audit area's fingerprints from the run: each task records the fingerprint
of every partition it wrote, the audit uses them instead of scanning the area, and publish still
refuses an area that changed after the run."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    from backfill.engines import Column
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
    cols = [
        Column(str(r[0]), str(r[1]), DIALECT.kind_of(str(r[1])))
        for r in con.execute("DESCRIBE t").fetchall()
    ]

    def run(sql: str) -> list[tuple[object, ...]]:
        return con.execute(sql).fetchall()

    fps, totals = fingerprint_parts_sums(con, "t", "at", parts, cols, ["id", "amount"])
    assert fps == fingerprint_parts(DIALECT, run, "t", cols, ("at", None), parts)
    for label, s, e in parts:
        where = DIALECT.in_periods("at", [(s, e)])
        assert fps[label] == fingerprint_where(DIALECT, run, "t", cols, where)
    assert sum(fp.rows for fp in fps.values()) > 0
    where = DIALECT.in_periods("at", [(s, e) for _, s, e in parts])
    assert totals == list(
        con.execute(f"SELECT sum(id), sum(amount) FROM t WHERE {where}").fetchone() or ()
    )


@st.composite
def _versions(draw: Any) -> tuple[pa.Table, pa.Table]:
    """A published and a new version keyed by id over four days: integer and decimal measures
    that may be NULL (whole days of NULLs too), a float measure; the new version changes,
    adds, drops or keeps each day's rows."""
    size = draw(st.integers(1, 16))
    days = draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
    cell = st.one_of(st.none(), st.integers(-50, 50))

    def table(ids: list[int], on: list[int], ints: list[Any], decs: list[Any]) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "day": pa.array([dt.date(2026, 8, 1) + dt.timedelta(d) for d in on], pa.date32()),
                "n": pa.array(ints, pa.int64()),
                "amount": pa.array(
                    [None if v is None else Decimal(v) / 4 for v in decs], pa.decimal128(38, 2)
                ),
                "x": pa.array([float(i) / 3 for i in ids], pa.float64()),
            }
        )

    def values() -> list[Any]:
        return draw(st.lists(cell, min_size=size, max_size=size))

    old = table(list(range(size)), days, values(), values())
    kept = draw(st.lists(st.booleans(), min_size=4, max_size=4))  # per day: the same rows?
    ints, decs = old["n"].to_pylist(), old["amount"].to_pylist()
    new_n, new_amount = values(), values()
    rows = [
        (i, d, ints[i], None if decs[i] is None else decs[i] * 4)
        if kept[d]
        else (i, d, new_n[i], new_amount[i])
        for i, d in enumerate(days)
        if kept[d] or draw(st.booleans())  # a changed day may also lose rows
    ]
    new = table(
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]
    )
    return old, new


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_versions())
def test_the_area_totals_follow_from_the_published_ones_and_the_diff(
    versions: tuple[pa.Table, pa.Table],
) -> None:
    """_area_totals (published total - differing days' old sums + their new sums) against
    DuckDB's sums over the whole new version; the new version is read (measure_sums) only for
    the float and for a total that may be NULL rather than 0."""
    import duckdb

    from backfill._numbers import to_kind
    from backfill.audit.audit import _area_totals
    from backfill.audit.diff import diff

    old, new = versions
    con = duckdb.connect()
    con.register("old_t", old)
    con.register("new_t", new)
    measures, kinds = ["n", "amount", "x"], {"n": "integer", "amount": "decimal", "x": "float"}

    def sums(table: str) -> dict[str, Any]:
        row = con.execute(f"SELECT sum(n), sum(amount), sum(x) FROM {table}").fetchone()
        assert row is not None
        return {c: to_kind(v, kinds[c]) for c, v in zip(measures, row, strict=True)}

    def day_rows(table: str) -> dict[Any, list[Any]]:
        got: dict[Any, list[Any]] = {}
        for r in con.execute(f"SELECT day, id, n, amount, x FROM {table} ORDER BY id").fetchall():
            got.setdefault(r[0], []).append(r[1:])
        return got

    before, after = day_rows("old_t"), day_rows("new_t")
    differing = sorted(d for d in set(before) | set(after) if before.get(d) != after.get(d))
    result = None
    if differing:
        listed = ", ".join(f"DATE '{d}'" for d in differing)
        result = diff(
            con.sql(f"SELECT * FROM old_t WHERE day IN ({listed})").to_arrow_table(),
            con.sql(f"SELECT * FROM new_t WHERE day IN ({listed})").to_arrow_table(),
            key=["id"],
            measures=measures,
            partition_by="day",
            grain="day",
            tz="UTC",
        )
    asked: list[list[str]] = []

    class NewVersion:  # what _area_totals may still ask the engine: DuckDB over the new rows
        def measure_sums(self, *args: Any, **kw: Any) -> dict[str, Any]:
            asked.append(list(args[3]))
            return sums("new_t")

    published, truth = sums("old_t"), sums("new_t")
    totals = {c: (published[c], None) for c in measures}
    got = _area_totals(NewVersion(), None, "m", None, None, kinds, totals, result)  # type: ignore[arg-type]
    assert {c: got[c][1] for c in measures} == truth
    assert {c: got[c][0] for c in measures} == published
    read = asked[0] if asked else []
    assert "x" in read  # a float's total is read, never pieced together
    for c in ("n", "amount"):  # an exact one only when its total may be NULL (or is 0)
        assert truth[c] is not None or c in read
        assert c not in read or truth[c] in (None, 0), (c, truth[c])


def test_a_derived_total_has_the_scale_of_the_engines_own_sum() -> None:
    from decimal import Decimal

    from backfill.audit.audit import _at_scale_of

    # an unconstrained PostgreSQL numeric streams as DECIMAL(38, 10): its zeros go, down to
    # the scale PostgreSQL's own sum of the published rows has
    assert str(_at_scale_of(Decimal("311779.9300000000"), Decimal("309722.73"))) == "311779.93"
    assert str(_at_scale_of(Decimal("5"), Decimal("1.50"))) == "5.00"
    # never rounded: digits beyond that scale stay
    assert str(_at_scale_of(Decimal("1.2345000000"), Decimal("1.00"))) == "1.2345000000"
    assert _at_scale_of(Decimal("7.10"), None) == Decimal("7.10")
    assert str(_at_scale_of(Decimal("7.10"), 3)) == "7.10"  # an integer sum: as it came
