"""What summing the measures in each engine costs a diff across engines (issue 30).

    python benchmarks/crossdiff_sums_bench.py                 # 5M rows, 90 days, 3 repeats
    python benchmarks/crossdiff_sums_bench.py --quick         # 200k rows, one run

Workload: a DuckDB file's fact table (id, day, qty BIGINT, amount DECIMAL(18,2), price DOUBLE)
and a Parquet copy of it in which 2 of the 90 days differ (1% of their rows' amount +0.01).
``backfill.diff_tables(parquet, duckdb, key="id", partition_by="day")`` runs with
``measures=[]`` (fingerprints only, as before) and with the default measures (qty, amount and
price summed per day in the same scan that fingerprints it), interleaved, each the median of
the repeats. Checked first: both give the same rows summary, and the measures' totals equal
DuckDB's own ``sum()`` of each side (exact for amount).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

import backfill


def build(directory: Path, rows: int, days: int) -> tuple[str, str]:
    """(the Parquet copy, the DuckDB table): their locations."""
    path = directory / "warehouse.duckdb"
    parquet = directory / "copy.parquet"
    con = duckdb.connect(str(path))
    con.execute(
        f"CREATE TABLE main.fact AS SELECT i AS id, DATE '2026-01-01' + CAST(i % {days} AS INT) "
        "AS day, CAST(hash(i) % 100 AS BIGINT) AS qty, "
        "CAST((hash(i) % 1000000) / 100 AS DECIMAL(18,2)) AS amount, "
        f"CAST(hash(i * 7) % 100000 AS DOUBLE) / 7 AS price FROM range({rows}) t(i)"
    )
    con.execute(
        f"COPY (SELECT id, day, qty, CASE WHEN day IN (DATE '2026-01-11', DATE '2026-02-20') "
        "AND id % 100 = 0 THEN amount + 0.01 ELSE amount END AS amount, price FROM main.fact) "
        f"TO '{parquet}' (FORMAT parquet)"
    )
    con.close()
    return str(parquet), f"duckdb://{path}#main.fact"


def run(a: str, b: str, measures: list[str] | None) -> tuple[float, Any]:
    t = time.perf_counter()
    result = backfill.diff_tables(a, b, "id", partition_by="day", measures=measures)
    return time.perf_counter() - t, result


def check(a: str, b: str, directory: Path) -> None:
    _, bare = run(a, b, [])
    _, summed = run(a, b, None)
    assert bare.summary == summed.summary, (bare.summary, summed.summary)
    assert len(summed.streamed) == 2, summed.streamed
    con = duckdb.connect(str(directory / "warehouse.duckdb"), read_only=True)
    sums = [
        con.execute(f"SELECT sum(qty), sum(amount), sum(price) FROM {rel}").fetchone()
        for rel in (f"'{a}'", "main.fact")
    ]
    con.close()
    totals = summed.measure_totals
    for i, m in enumerate(("qty", "amount", "price")):
        old, new = totals[m]
        if m == "price":
            assert abs(old - sums[0][i]) <= 1e-9 * abs(sums[0][i]), (m, old, sums[0][i])
        else:
            assert (Decimal(old), Decimal(new)) == (sums[0][i], sums[1][i]), (m, old, new, sums)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="200k rows, one run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.repeats = 200_000, 1
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        a, b = build(directory, args.rows, args.days)
        check(a, b, directory)
        times: dict[str, list[float]] = {"fingerprints only": [], "with measure sums": []}
        for _ in range(args.repeats):
            times["fingerprints only"].append(run(a, b, [])[0])
            times["with measure sums"].append(run(a, b, None)[0])
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratio = medians["with measure sums"] / medians["fingerprints only"]
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"rows": args.rows, "medians": medians, "ratio": ratio, "load": load}))
        return
    print(
        f"{args.rows:,} rows, {args.days} days (2 differ), median of {args.repeats}, "
        f"load {load:.1f}"
    )
    for k, v in medians.items():
        print(f"  {k}: {v:.2f} s")
    print(f"  measure sums cost {ratio:.2f}x the fingerprints-only diff")


if __name__ == "__main__":
    main()
