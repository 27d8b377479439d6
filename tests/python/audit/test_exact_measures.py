"""Exact measure sums end to end: the C++ diff against Python's decimal, the gates, the audit's
JSON and text and the changelog on the shop against DuckDB's own exact sum(revenue)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backfill
from backfill._numbers import delta, fmt, pct, pct_exact, places, typed, value_type
from backfill.audit.gates import ModelFacts, evaluate, parse_gates
from backfill.engines.duckdb import audit_schema
from backfill.examples import shop
from shop_support import AS_OF, cli, copy_built, query

# Unscaled decimal values up to 30 digits: sums of many exceed a double's 15-17 digits.
_UNSCALED = st.integers(-(10**30), 10**30)


@st.composite
def decimal_pair(draw: Any) -> tuple[pa.Table, pa.Table, int, int]:
    """Old and new tables keyed by id, partitioned by day, with a decimal measure ``amount`` of
    scale s_old / s_new (possibly different) and an integer measure ``n``."""
    s_old, s_new = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    size = draw(st.integers(1, 40))
    ids = list(range(size))
    days = draw(st.lists(st.integers(0, 4), min_size=size, max_size=size))
    tables = []
    for scale in (s_old, s_new):
        unscaled = draw(st.lists(st.one_of(st.none(), _UNSCALED), min_size=size, max_size=size))
        amount = [None if u is None else Decimal(f"{u}E-{scale}") for u in unscaled]
        n = draw(st.lists(st.integers(-(2**40), 2**40), min_size=size, max_size=size))
        tables.append(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "day": pa.array(
                        [dt.date(2026, 8, 1) + dt.timedelta(d) for d in days], pa.date32()
                    ),
                    "amount": pa.array(amount, pa.decimal128(38, scale)),
                    "n": pa.array(n, pa.int64()),
                }
            )
        )
    return tables[0], tables[1], s_old, s_new


def _exact_sums(t: pa.Table, column: str) -> dict[str, Any]:
    """The oracle: Python's decimal with enough digits (the default 28 would round)."""
    out: dict[str, Any] = {}
    with localcontext() as ctx:
        ctx.prec = 80
        for day, v in zip(t["day"].to_pylist(), t[column].to_pylist(), strict=True):
            out.setdefault(day.isoformat(), 0)
            if v is not None:
                out[day.isoformat()] += v
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decimal_pair(), st.sampled_from([1, 2]))
def test_diff_sums_decimals_and_integers_exactly(
    pair: tuple[pa.Table, pa.Table, int, int], threads: int
) -> None:
    old, new, s_old, s_new = pair
    r = backfill.diff(old, new, "id", partition_by="day", measures=["amount", "n"], threads=threads)
    scale = max(s_old, s_new)
    types = r.partitions.types
    assert types["amount_old"] == f"decimal128(38, {scale})"
    parts = {p["partition"]: p for p in r.partitions.to_pylist()}
    for col in ("amount", "n"):
        want_old, want_new = _exact_sums(old, col), _exact_sums(new, col)
        for label, p in parts.items():
            o, n = want_old.get(label, 0), want_new.get(label, 0)
            assert p[f"{col}_old"] == o and p[f"{col}_new"] == n, (col, label)
            with localcontext() as ctx:
                ctx.prec = 80
                assert p[f"{col}_delta"] == n - o
            if col == "n":  # integers stay integers
                assert isinstance(p["n_old"], int)
            else:  # at the larger scale, every digit
                assert isinstance(p["amount_old"], Decimal)
                assert p["amount_old"].as_tuple().exponent == -scale
            want_pct = pct(o, n)
            assert (p[f"{col}_delta_pct"] is None) == (want_pct is None)
            if want_pct is not None:
                assert p[f"{col}_delta_pct"] == pytest.approx(want_pct, rel=1e-12, abs=1e-12)
    totals = {row["column"]: row for row in r.columns.to_pylist()}
    assert totals["amount"]["sum_kind"] == "decimal" and totals["n"]["sum_kind"] == "integer"
    with localcontext() as ctx:
        ctx.prec = 80
        assert totals["amount"]["sum_old"] == sum(_exact_sums(old, "amount").values())
    assert totals["n"]["delta"] == sum(new["n"].to_pylist()) - sum(old["n"].to_pylist())


def test_float_measures_stay_floats_and_say_so() -> None:
    old = pa.table(
        {
            "id": [1, 2],
            "x": pa.array([0.1, 0.2]),
            "d": pa.array([Decimal("0.10"), Decimal("0.20")], pa.decimal128(10, 2)),
        }
    )
    new = pa.table(
        {
            "id": [1, 2],
            "x": pa.array([0.1, 0.3]),
            "d": pa.array([Decimal("0.10"), Decimal("0.30")], pa.decimal128(10, 2)),
        }
    )
    r = backfill.diff(old, new, "id")
    rows = {row["column"]: row for row in r.columns.to_pylist()}
    assert rows["x"]["sum_kind"] == "float" and rows["d"]["sum_kind"] == "decimal"
    assert isinstance(rows["d"]["sum_old"], float)  # a float measure makes the shared column float
    only_d = {
        row["column"]: row
        for row in backfill.diff(old, new, "id", measures=["d"]).columns.to_pylist()
    }
    assert only_d["d"]["sum_new"] == Decimal("0.40") and only_d["d"]["delta"] == Decimal("0.10")


def test_a_sum_beyond_38_digits_is_an_error_naming_the_measure() -> None:
    big = Decimal(10**37)
    t = pa.table({"id": list(range(20)), "d": pa.array([big] * 20, pa.decimal128(38, 0))})
    with pytest.raises(backfill.InvalidInputError, match="measure 'd' does not fit in 38"):
        backfill.diff(t, t.slice(1), "id", partition_by=None, measures=["d"])


@given(
    st.lists(
        st.decimals(
            allow_nan=False, allow_infinity=False, places=2, min_value=-(10**20), max_value=10**20
        ),
        min_size=2,
        max_size=2,
    )
)
def test_numbers_against_python_decimal(values: list[Decimal]) -> None:
    old, new = values
    assert delta(old, new) == new - old
    if old:
        with localcontext() as ctx:
            ctx.prec = 100
            assert pct_exact(old, new) == (new - old) / abs(old) * 100
    text = fmt(new - old, sign=True)
    assert Decimal(text.replace(",", "")) == new - old
    vt = value_type("decimal", [old, new])
    with localcontext() as ctx:
        ctx.prec = 60
        padded = old.quantize(Decimal("1e-12"))  # as a DECIMAL(38,12) column gives it back
    back = typed(padded, vt)
    assert back == old and places(back) == max(places(old), places(new))


def test_gates_compare_exactly() -> None:
    # 0.10 + 0.20 down to 0: in binary floats the delta is -0.30000000000000004, below -0.3
    facts = ModelFacts(
        totals={"amount": (Decimal("0.10") + Decimal("0.20"), Decimal("0.00"))},
        added=0,
        removed=0,
        changed=0,
        changed_per_partition={},
        column_changes={},
        schema_changes=[],
        columns=["amount"],
    )
    gate = parse_gates({"m": [{"measure": "amount", "change": ["-0.3", "0"]}]}, ["m"])["m"][0]
    result = evaluate(gate, facts)
    assert result.passed, result.reason
    assert "0.30 -> 0.00 (delta -0.30, -100.000%)" in result.reason
    tight = parse_gates({"m": [{"measure": "amount", "change": ["-0.29", "0"]}]}, ["m"])["m"][0]
    assert not evaluate(tight, facts).passed


# -- the shop: DuckDB's own sums are the oracle ------------------------------------------------
def test_shop_audit_json_and_changelog_are_exact(built_shop: Path, tmp_path: Path) -> None:
    root = copy_built(built_shop, tmp_path / "shop")
    shop.fix(root)
    start, end = "2026-07-20", "2026-08-21"
    p = backfill.Project.load(root)
    bf = p.backfill(p.plan("fct_daily_sales+", start, end, as_of=AS_OF), reason="discount fix")
    assert bf.run(concurrency=2).ok
    where = f"sales_date >= DATE '{start}' AND sales_date < DATE '{end}'"
    ((old_total,),) = query(root, f"SELECT sum(revenue) FROM main.fct_daily_sales WHERE {where}")
    ((new_total,),) = query(
        root, f"SELECT sum(revenue) FROM {audit_schema(bf.id)}.fct_daily_sales WHERE {where}"
    )
    assert isinstance(old_total, Decimal) and old_total != new_total

    r = cli("audit", bf.id, "--project", str(root), "--json")
    assert r.returncode == 0, r.stderr
    daily = next(m for m in json.loads(r.stdout)["models"] if m["model"] == "fct_daily_sales")
    assert daily["measure_kinds"]["revenue"] == "decimal"
    assert daily["totals"]["revenue"] == [str(old_total), str(new_total)]
    assert daily["total_deltas"]["revenue"]["delta"] == str(new_total - old_total)
    for text in (*daily["totals"]["revenue"], daily["total_deltas"]["revenue"]["delta"]):
        assert len(text.split(".")[1]) == 2  # exactly two decimals, as DECIMAL(18, 2) sums are
    assert isinstance(daily["totals"]["orders"][0], int)  # integer measures stay integers

    # The top 5 days by |delta| in the text: the oracle's, in order.
    per_day = query(
        root,
        f"""
        SELECT o.sales_date::VARCHAR, o.revenue, n.revenue, n.revenue - o.revenue
        FROM main.fct_daily_sales o JOIN {audit_schema(bf.id)}.fct_daily_sales n USING (sales_date)
        WHERE o.revenue <> n.revenue ORDER BY abs(n.revenue - o.revenue) DESC, 1 LIMIT 5""",
    )
    report = bf.audit()
    top = report["fct_daily_sales"].top_partitions("revenue")
    assert [(pa_.label, *v[:3]) for pa_, v in top] == [tuple(r) for r in per_day]
    text = str(report)
    assert "revenue: the 5 partition(s) that moved most" in text
    for day, o, n, d in per_day:
        assert f"{day}  {o:,.2f} -> {n:,.2f}, {d:+,.2f}" in text
    assert f"revenue: {old_total:,.2f} -> {new_total:,.2f}" in text
    html = report._repr_html_()
    assert html is not None and "partition(s) that moved most" in html
    assert html.count("<svg") >= 2  # the sparkline beside the diff's own chart

    bf.publish(note="revenue corrected")
    ((v_old, v_new, d, vt),) = query(
        root,
        "SELECT value_old, value_new, delta, value_type FROM "
        "main.backfill_changelog WHERE model = "
        "'fct_daily_sales' AND measure = 'revenue' AND "
        "partition IS NULL",
    )
    assert (v_old, v_new, d, vt) == (old_total, new_total, new_total - old_total, "decimal(38,2)")
    entry = p.changelog().publications()[0]
    t = entry["models"]["fct_daily_sales"]["totals"]["revenue"]
    assert (t["old"], t["new"], str(t["delta"])) == (
        old_total,
        new_total,
        str(new_total - old_total),
    )
    moved = entry["models"]["fct_daily_sales"]["top_partitions"]["revenue"]
    assert [(m["partition"], m["delta"]) for m in moved] == [(r[0], r[3]) for r in per_day]
    log_text = str(p.changelog())
    assert "revenue, the partitions that moved most:" in log_text
    assert f"{per_day[0][0]}: {per_day[0][1]:,.2f} -> {per_day[0][2]:,.2f}" in log_text
