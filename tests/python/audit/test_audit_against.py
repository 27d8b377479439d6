"""``bf.audit(against=...)`` / ``backfill audit --against``: a real backfill of the shop on
DuckDB, its audit area compared with the same model's rows copied into PostgreSQL with
deliberate differences (the report finds exactly those, over the backfilled partitions only, with
the totals PostgreSQL and DuckDB sum themselves), with an identical Parquet export of another
model, and bad input (one clear error, nothing recorded); the installed console script in a new
process."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
from backfill.engines.duckdb import audit_schema
from backfill.errors import InvalidInputError, NotFoundError
from backfill.examples import shop
from shop_support import AS_OF, copy_built, query

START, END = "2026-07-20", "2026-08-21"  # 32 days
WINDOW = f"sales_date >= DATE '{START}' AND sales_date < DATE '{END}'"
BACKFILL = Path(sys.executable).parent / "backfill"


@pytest.fixture(scope="module")
def audited(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The shop with the discount fix backfilled into an audit area over the window: (root,
    backfill id)."""
    root = copy_built(built_shop, tmp_path_factory.mktemp("against") / "shop")
    shop.fix(root)
    p = backfill.Project.load(root)
    bf = p.backfill(p.plan("fct_daily_sales+", START, END, as_of=AS_OF), reason="discount fix")
    assert bf.run(concurrency=2).ok
    bf.engine.close()
    return root, bf.id


@pytest.fixture(scope="module")
def pg_url(pg_server: Any) -> str:
    return str(pg_server.create_database("against"))


def _to_postgres(url: str, rows: list[tuple[Any, ...]]) -> str:
    """``rows`` of fct_daily_sales as a new PostgreSQL table; its location."""
    name = f"fct_daily_sales_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE public.{name} (sales_date date, orders bigint, units numeric(38,0), "
            "revenue numeric(18,2))"
        )
        with conn.cursor().copy(f"COPY public.{name} FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
    return f"{url}#public.{name}"


def _old_system(root: Path, bf_id: str, url: str) -> tuple[str, list[tuple[Any, ...]]]:
    """What the backfill wrote for fct_daily_sales, in PostgreSQL, with differences: revenue
    of 2026-08-03 +10.00, units of 2026-08-04 +1, 2026-08-10 missing, and a row outside the
    backfilled window (which the audit must not see). Its location and rows."""
    area = audit_schema(bf_id)
    rows = query(
        root,
        "SELECT sales_date, orders, units, revenue FROM "
        f"{area}.fct_daily_sales WHERE {WINDOW} ORDER BY 1",
    )
    assert len(rows) == 32
    old = []
    for d, orders, units, revenue in rows:
        if d.isoformat() == "2026-08-10":
            continue
        if d.isoformat() == "2026-08-03":
            revenue += Decimal("10.00")
        if d.isoformat() == "2026-08-04":
            units += 1
        old.append((d, orders, units, revenue))
    outside = (rows[0][0].replace(month=9, day=15), 1, 1, Decimal("1.00"))
    return _to_postgres(url, [*old, outside]), rows


def _pg_sum(location: str) -> Decimal:
    url, _, table = location.rpartition("#")
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT sum(revenue) FROM {table} WHERE {WINDOW}").fetchone()
    assert row is not None
    return Decimal(row[0])


def test_the_audit_against_postgres_finds_exactly_the_differences(
    audited: tuple[Path, str], pg_url: str, tmp_path: Path
) -> None:
    root, bf_id = audited
    location, _ = _old_system(root, bf_id, pg_url)
    monthly = tmp_path / "monthly.parquet"
    query(
        root,
        f"COPY (SELECT * FROM {audit_schema(bf_id)}.fct_monthly_sales) TO '{monthly}' "
        "(FORMAT parquet)",
    )
    bf = backfill.Backfill.open(bf_id, project=root)
    report = bf.audit(against={"fct_daily_sales": location, "fct_monthly_sales": str(monthly)})
    daily = report["fct_daily_sales"]
    assert daily.against == location and daily.key == ["sales_date"]
    assert daily.key_source == "natural"
    assert len(daily.partitions) == 32  # the backfilled days: not the row of September
    differing = {p.label: p for p in daily.differing}
    assert set(differing) == {"2026-08-03", "2026-08-04", "2026-08-10"}
    assert (differing["2026-08-10"].added, differing["2026-08-10"].rows_old) == (1, 0)
    assert differing["2026-08-03"].changed == 1 and differing["2026-08-04"].changed == 1
    assert daily.changed_columns == {"units": 1, "revenue": 1}
    assert daily.diff is not None
    assert daily.diff.summary.removed == 0 and daily.diff.summary.matched == 31
    sample = {(r["sales_date"].isoformat(), r["column"]) for r in daily.diff.changed_sample}
    assert sample == {("2026-08-03", "revenue"), ("2026-08-04", "units")}
    # measure totals: PostgreSQL's and DuckDB's own exact sums over the window
    ((area_total,),) = query(
        root, f"SELECT sum(revenue) FROM {audit_schema(bf_id)}.fct_daily_sales WHERE {WINDOW}"
    )
    assert daily.totals["revenue"] == (_pg_sum(location), area_total)
    assert daily.measure_kinds["revenue"] == "decimal"
    assert [str(v).count(".") for v in daily.totals["units"]] == [0, 0]  # at its own scale
    old, new, delta, _ = differing["2026-08-03"].measures["revenue"]
    assert delta == Decimal("-10.00") and old - new == Decimal("10.00")
    monthly_audit = report["fct_monthly_sales"]
    assert monthly_audit.against == str(monthly) and not monthly_audit.differing
    assert [p.label for p in monthly_audit.partitions] == ["2026-07", "2026-08"]
    assert not report.identical and report.passed and not report.recorded
    text = str(report)
    assert f"fct_daily_sales compared with {location} (old)" in text
    assert "not recorded" in text and "fct_sales_7d" not in text
    assert report.to_dict()["against"]["fct_daily_sales"] == location
    html = report._repr_html_()
    assert html is not None and f"fct_daily_sales with <code>{location}</code>" in html
    assert bf.ledger.audits(bf_id) == []  # publish still needs the audit of the published
    # gates of the call are checked against the other table
    gated = bf.audit(
        against={"fct_daily_sales": location}, gates={"fct_daily_sales": [{"added_rows": 0}]}
    )
    assert not gated.passed


def test_bad_input_is_one_clear_error_and_nothing_recorded(
    audited: tuple[Path, str], pg_url: str
) -> None:
    root, bf_id = audited
    bf = backfill.Backfill.open(bf_id, project=root)
    location, _ = _old_system(root, bf_id, pg_url)
    with pytest.raises(InvalidInputError, match="rebuilt 3 models"):
        bf.audit(against=location)
    with pytest.raises(NotFoundError, match="no model 'nope'"):
        bf.audit(against={"nope": location})
    with pytest.raises(InvalidInputError, match="did not rebuild clean_orders"):
        bf.audit(against={"clean_orders": location})
    with pytest.raises(NotFoundError, match="no such table"):
        bf.audit(against={"fct_daily_sales": f"{pg_url}#public.missing"})
    with pytest.raises(InvalidInputError, match="cannot connect") as unreachable:
        bf.audit(against={"fct_daily_sales": "postgresql://me:s3cret@127.0.0.1:1/x#public.t"})
    assert "s3cret" not in str(unreachable.value)
    with pytest.raises(InvalidInputError, match=r"key column 'nope' is not a column"):
        bf.audit(against={"fct_daily_sales": location}, key=["nope"])
    assert bf.ledger.audits(bf_id) == []


def test_the_cli_audits_against_postgres_in_a_new_process(
    audited: tuple[Path, str], pg_url: str, tmp_path: Path
) -> None:
    root, bf_id = audited
    location, rows = _old_system(root, bf_id, pg_url)
    same = _to_postgres(pg_url, rows)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [str(BACKFILL), "audit", bf_id, "--project", str(root), *argv],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=180,
        )
        assert "Traceback" not in r.stderr, r.stderr
        return r

    r = run("--select", "fct_daily_sales", "--against", location, "--json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["against"] == {"fct_daily_sales": location} and out["recorded"] is False
    (daily,) = out["models"]
    assert (daily["rows_changed"], daily["rows_added"], daily["rows_removed"]) == (2, 1, 0)
    assert daily["partitions_differing"] == 3 and daily["changed_columns"] == {
        "units": 1,
        "revenue": 1,
    }
    text = run("--against", f"fct_daily_sales={location}")
    assert text.returncode == 1 and f"compared with {location} (old)" in text.stdout
    ok = run("--against", f"fct_daily_sales={same}")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "all 32 partition(s) identical" in ok.stdout
    for argv, message in [
        (
            [
                "--against",
                "postgresql://me:s3cret@127.0.0.1:1/x#public.t",
                "--select",
                "fct_daily_sales",
            ],
            "cannot connect",
        ),
        (["--against", location], "rebuilt 3 models"),
        (["--against", location, "--select", "nope"], "--select 'nope'"),
        (["--against", f"fct_daily_sales={pg_url}#public.missing"], "no such table"),
    ]:
        bad = run(*argv)
        assert bad.returncode == 2 and message in bad.stderr, (argv, bad.stderr)
        assert "s3cret" not in bad.stderr + bad.stdout
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert backfill.Backfill.open(bf_id, project=root).ledger.audits(bf_id) == []
