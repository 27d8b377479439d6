"""`backfill demo` (small shop, for speed) and the shop notebook run end to end."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill.cli",
            "demo",
            "--dir",
            str(target),
            "--orders-per-day",
            "30",
            "--concurrency",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    steps = re.findall(r"^== (\d)\. ", out, flags=re.M)
    assert steps == [str(i) for i in range(1, 10)]
    assert "+             * (1 - coalesce(i.discount, i.discount_pct * 0.01, 0)))" in out
    assert "fct_daily_sales: one day (2026-08-01) took" in out and "concurrent ≈" in out
    assert "89 days to rebuild" in out
    assert "audit of bf_" in out and "gates passed" in out
    # Revenue ~2% lower in the daily, monthly and rolling figures; nothing else changed.
    found = re.findall(
        r"^  (fct_\w+): (\d+) of (\d+) partition\(s\) differ -- rows: (\d+) changed, 0 added, "
        r"0 removed .*\n    changed columns: (\w+) \(\d+ rows\)\n"
        r"    (\w+): [\d,.]+ -> [\d,.]+ \(([-+\d.]+)%\)\n    unchanged totals: (.*)$",
        out,
        flags=re.M,
    )
    by_model = {f[0]: f[1:] for f in found}
    assert set(by_model) == {"fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"}, out
    assert by_model["fct_daily_sales"][:4] == ("89", "89", "89", "revenue")
    assert by_model["fct_monthly_sales"][:4] == ("3", "3", "3", "revenue")
    assert by_model["fct_sales_7d"][:4] == ("95", "95", "95", "revenue_7d")
    for _differ, _total, _rows, column, measure, pct, same in by_model.values():
        assert measure == column and -3.0 < float(pct) < -1.0
        assert "orders" in same
    assert "published bf_" in out and "changelog" in out
    assert "note:   Revenue from 1 Aug 2026 was overstated" in out
    # The demo ends with the message consumers receive: models, periods, old -> new (about -2%).
    message = out.split("== 9. ", 1)[1]
    assert (
        "[shop] fct_daily_sales, fct_monthly_sales, fct_sales_7d: published history changed"
        in message
    )
    assert re.search(r"^    revenue: [\d,.]+ -> [\d,.]+ \(-[12]\.\d%\)$", message, flags=re.M), (
        message
    )
    assert "Reason: discount bug fixed" in message and "Note: Revenue from 1 Aug" in message
    assert "- fct_daily_sales: 89 of 89 partition(s) changed: 2026-08-01 .. 2026-10-28" in message
    c = duckdb.connect(str(target / "warehouse.duckdb"), read_only=True)
    try:
        models = c.execute(
            "SELECT DISTINCT model FROM main.backfill_changelog ORDER BY 1"
        ).fetchall()
        schemas = c.execute(
            "SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE 'audit_%'"
        ).fetchone()
    finally:
        c.close()
    assert [m[0] for m in models] == ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]
    assert schemas == (0,)


def _notebook_tool() -> ModuleType:
    """tools/run_notebook.py, which `make notebook` runs: the same execution and comparison."""
    path = ROOT / "tools" / "run_notebook.py"
    spec = importlib.util.spec_from_file_location("run_notebook", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebook_executes_and_its_committed_outputs_are_current() -> None:
    # nbclient and nbformat come with the `notebook` extra that `make test` installs: a missing
    # one is a set-up error, not a reason to skip.
    tool = _notebook_tool()
    path = ROOT / "notebooks" / "shop_backfill.ipynb"
    committed = tool.read(path)
    nb = tool.execute(path)  # at the notebook's own shop size, as `make notebook` runs it
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("fct_daily_sales" in h and "<svg" in h for h in html)  # plan and audit HTML
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the matplotlib plot
    text = "".join(o.get("text", "") for o in outputs)
    assert "fct_daily_sales.revenue:" in text and "one day (2026-08-01) took" in text
    # It is committed executed, for people who read it on a forge before running it: its
    # outputs must be what it shows today (ids, times, durations, paths masked; see the tool).
    diff = tool.differences(committed, nb)
    if diff:
        pytest.fail(
            "the outputs committed in notebooks/shop_backfill.ipynb are stale: run `make "
            "notebook` and commit the notebook. Committed vs fresh (masked):\n"
            + "\n".join(diff[:150]),
            pytrace=False,
        )
