"""A project's model as a side of backfill.diff_tables and ``backfill diff`` (``--project``): the
shop's fct_daily_sales on DuckDB by name, opened by the project's engine, against Parquet
exports of it; run as users run it (the installed console script, a new process)."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import backfill
from backfill.errors import InvalidInputError


def _exports(built_shop: Path, folder: Path) -> tuple[Path, Path]:
    """fct_daily_sales as it is, and with one day's revenue a cent higher, as Parquet files."""
    con = duckdb.connect(str(built_shop / "warehouse.duckdb"), read_only=True)
    table = con.sql("SELECT * FROM main.fct_daily_sales").to_arrow_table()
    con.close()
    same, changed = folder / "same.parquet", folder / "changed.parquet"
    pq.write_table(table, same)
    revenue = table.column("revenue").to_pylist()
    revenue[10] += Decimal("0.01")
    i = table.schema.get_field_index("revenue")
    pq.write_table(
        table.set_column(i, "revenue", pa.array(revenue, table.schema.field(i).type)), changed
    )
    return same, changed


def test_a_model_of_the_project_by_name(built_shop: Path, tmp_path: Path) -> None:
    same, changed = _exports(built_shop, tmp_path)
    kw = {"partition_by": "sales_date", "grain": "month", "project": built_shop}
    assert backfill.diff_tables("fct_daily_sales", str(same), "sales_date", **kw).identical
    got = backfill.diff_tables("fct_daily_sales", str(changed), "sales_date", **kw)
    assert got.summary.changed == 1 and len(got.streamed) == 1
    assert got.snapshots["a"].startswith("DuckDB read-only")
    by_table = backfill.diff_tables("main.fct_daily_sales", str(changed), "sales_date", **kw)
    assert by_table.summary == got.summary
    with pytest.raises(InvalidInputError, match="expected a model of project"):
        backfill.diff_tables("nope", str(same), "sales_date", project=built_shop)
    with pytest.raises(InvalidInputError, match=r"or a model .* project="):
        backfill.diff_tables("fct_daily_sales", str(same), "sales_date")


def test_backfill_diff_names_a_model_of_its_project(built_shop: Path, tmp_path: Path) -> None:
    same, changed = _exports(built_shop, tmp_path)
    exe = str(Path(sys.executable).parent / "backfill")
    args = ["--project", str(built_shop), "--key", "sales_date", "--partition-by", "sales_date"]
    args += ["--grain", "month", "--json"]

    def run(other: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, "diff", "fct_daily_sales", str(other), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    ok = run(same)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["streamed"] == []
    bad = run(changed)
    assert bad.returncode == 1, bad.stderr
    out = json.loads(bad.stdout)
    assert out["summary"]["changed"] == 1 and len(out["streamed"]) == 1
