"""backfill.diff_tables against reladiff (the maintained fork of data-diff, hashdiff mode): the
same table in PostgreSQL and in a DuckDB file, compared across the two warehouses.

    python benchmarks/crossdiff_bench.py            # 10M rows, median of 3 (reladiff: of 1)
    python benchmarks/crossdiff_bench.py --quick    # 200k rows, once each (the test suite)
    python benchmarks/crossdiff_bench.py --url postgresql://me@db/bench   # a server you name

The workload: ``sales`` with ``id bigint PRIMARY KEY`` (the key), ``day date`` (100 days of
equal size, ids ascending with the day), ``customer int``, ``amount numeric(12,2)``, ``qty int``,
``status text`` and ``updated_at timestamp``, once in PostgreSQL (a throwaway server on
127.0.0.1 and a free port unless ``--url``; loaded with COPY, then VACUUM ANALYZE) and once per
case in a DuckDB file, where the case's rows have ``amount`` changed by one cent:

* (a) identical: no row changed;
* (b) 0.1% of the rows changed, all in 5 of the 100 days (2% of each of those days);
* (c) 10% of the rows changed, everywhere.

backfill runs ``diff_tables(pg, duckdb, key="id", partition_by="day")`` (its defaults:
bisection threshold 16,384, factor 32); reladiff runs ``diff_tables(..., algorithm=HASHDIFF)``
with its defaults (the same threshold and factor, threaded) over the same columns but ``day``
(its database layer, sqeleton, has no DuckDB DATE type: reladiff does a little less work). Both
count
the rows that differ: backfill's changed + added + removed against reladiff's distinct keys in
its ``-``/``+`` rows, which must agree (and equal the rows the case changed). The competitors
alternate (one run of each per round). Targets: backfill >= 5x faster than reladiff in (a) and
(b), >= 10x in (c); and the rows per second of (a) against data-diff's published anchor
(25M identical rows in under 10 s: 2.5M rows/s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import psycopg

import backfill

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from pg_support import PgServer

TABLE = "sales"
DAYS = 100
COLUMNS = ["id", "day", "customer", "amount", "qty", "status", "updated_at"]
#: data-diff's README: "25M rows in under 10 seconds" when the tables are identical
ANCHOR_ROWS_PER_S = 25_000_000 / 10
CASES = {
    "a": ("identical", "FALSE"),
    # 2% of each of 5 days: 0.1% of the table
    "b": ("0.1% changed in 5 days", "day_index IN (10, 30, 50, 70, 90) AND id % 50 = 7"),
    "c": ("10% changed everywhere", "id % 10 = 3"),
}
TARGETS = {"a": 5.0, "b": 5.0, "c": 10.0}


def base_select(n: int) -> str:
    """The rows of the table as a DuckDB SELECT (with ``day_index`` for the cases' filters)."""
    per_day = n // DAYS
    step_us = 86_400_000_000 // per_day
    return (
        f"SELECT i AS id, CAST(i // {per_day} AS INTEGER) AS day_index, "
        f"CAST(DATE '2024-01-01' + CAST(i // {per_day} AS INTEGER) AS DATE) AS day, "
        "CAST((i * 7919) % 100000 AS INTEGER) AS customer, "
        "CAST(((i * 104729) % 10000000) / 100 AS DECIMAL(12,2)) AS amount, "
        "CAST(i % 17 AS INTEGER) AS qty, "
        "(['paid', 'shipped', 'returned', 'open'])[1 + i % 4] AS status, "
        f"make_timestamp(1704067200000000 + i * {step_us}) AS updated_at "
        f"FROM range({per_day * DAYS}) r(i)"
    )


def make_duckdb(path: Path, n: int, changed: str) -> int:
    """The case's DuckDB file; returns the number of rows changed."""
    con = duckdb.connect(str(path))
    cols = ", ".join(
        f"CASE WHEN {changed} THEN amount + 0.01 ELSE amount END AS amount" if c == "amount" else c
        for c in COLUMNS
    )
    con.execute(f"CREATE TABLE main.{TABLE} AS SELECT {cols} FROM ({base_select(n)}) ORDER BY id")
    row = con.execute(f"SELECT count(*) FROM ({base_select(n)}) WHERE {changed}").fetchone()
    con.close()
    assert row is not None
    return int(row[0])


def load_postgres(url: str, n: int, work: Path) -> float:
    """The base table into PostgreSQL (COPY of a CSV DuckDB writes); returns seconds."""
    began = time.perf_counter()
    csv = work / "base.csv"
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT {', '.join(COLUMNS)} FROM ({base_select(n)})) TO '{csv}' (HEADER false)"
    )
    con.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS public.{TABLE}")
        conn.execute(
            f"CREATE TABLE public.{TABLE} (id bigint, day date, customer integer, "
            "amount numeric(12,2), qty integer, status text, updated_at timestamp)"
        )
        with (
            conn.cursor().copy(f"COPY public.{TABLE} FROM STDIN (FORMAT csv)") as copy,
            open(csv, "rb") as f,
        ):
            while chunk := f.read(1 << 22):
                copy.write(chunk)
        conn.execute(f"ALTER TABLE public.{TABLE} ADD PRIMARY KEY (id)")
        conn.execute(f"VACUUM ANALYZE public.{TABLE}")
    csv.unlink()
    return time.perf_counter() - began


def run_backfill(pg: str, duck: Path) -> dict[str, Any]:
    r = backfill.diff_tables(
        f"{pg}#public.{TABLE}", f"duckdb://{duck}#main.{TABLE}", "id", partition_by="day"
    )
    s = r.summary
    return {
        "differing": s.changed + s.added + s.removed,
        "streamed_rows": sum(r.streamed_rows),
        "levels": [(lv.level, lv.checked, lv.differing) for lv in r.levels],
        "split": {k: v for k, v in r.timings.items() if not k.startswith("diff ")},
    }


def run_reladiff(pg: str, duck: Path) -> dict[str, Any]:
    import reladiff

    # sqeleton (reladiff's database layer) knows no DuckDB DATE: reladiff compares the other
    # six columns (less work than backfill's seven; no case changes day)
    extra = tuple(c for c in COLUMNS if c not in ("id", "day"))
    t1 = reladiff.connect_to_table(pg, TABLE, "id", extra_columns=extra, thread_count=2)
    t2 = reladiff.connect_to_table(
        f"duckdb://main@{duck}", TABLE, "id", extra_columns=extra, thread_count=1
    )
    try:
        keys: set[Any] = set()
        for _sign, row in reladiff.diff_tables(t1, t2, algorithm=reladiff.Algorithm.HASHDIFF):
            keys.add(row[0])
    finally:
        t1.database.close()
        t2.database.close()
    return {"differing": len(keys)}


def timed(
    fn: Callable[[str, Path], dict[str, Any]], url: str, duck: Path
) -> tuple[float, dict[str, Any]]:
    began = time.perf_counter()
    out = fn(url, duck)
    return time.perf_counter() - began, out


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200k rows, one run each")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None, help="runs of backfill per case")
    ap.add_argument(
        "--reladiff-repeat", type=int, default=1, help="runs of reladiff per case (default 1)"
    )
    ap.add_argument("--cases", default="abc", help="which cases to run (default abc)")
    ap.add_argument("--url", help="a database on a server you name (default: a throwaway one)")
    ap.add_argument("--json", action="store_true", help="a JSON line with the results last")
    args = ap.parse_args(argv)
    n = args.rows or (200_000 if args.quick else 10_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    server = None if args.url else PgServer.start()
    url = args.url or server.create_database("crossdiff")  # type: ignore[union-attr]
    work = Path(tempfile.mkdtemp(prefix="crossdiff_bench_"))
    ok, results = True, {}
    try:
        seconds = load_postgres(url, n, work)
        print(
            f"workload: {TABLE} of {n:,} rows ({n // DAYS:,} a day over {DAYS} days), key id, "
            f"7 columns, in PostgreSQL (loaded in {seconds:.1f} s) and in a DuckDB file per "
            f"case; load average {load()}"
        )
        for case in args.cases:
            title, changed = CASES[case]
            duck = work / f"case_{case}.duckdb"
            expected = make_duckdb(duck, n, changed)
            times: dict[str, list[float]] = {"backfill": [], "reladiff": []}
            outs: dict[str, dict[str, Any]] = {}
            for i in range(max(repeat, args.reladiff_repeat)):
                if i < repeat:
                    t, outs["backfill"] = timed(run_backfill, url, duck)
                    times["backfill"].append(t)
                if i < args.reladiff_repeat:
                    t, outs["reladiff"] = timed(run_reladiff, url, duck)
                    times["reladiff"].append(t)
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = med["reladiff"] / med["backfill"]
            mine, theirs = outs["backfill"], outs["reladiff"]
            agree = mine["differing"] == theirs["differing"] == expected
            ok &= agree
            split = ", ".join(f"{k} {v:.2f} s" for k, v in mine["split"].items())
            print(f"== ({case}) {title}: {expected:,} rows changed; load average {load()}")
            print(
                f"  backfill: {med['backfill']:8.2f} s (median of {len(times['backfill'])}); "
                f"{mine['differing']:,} rows differ; streamed {mine['streamed_rows']:,} rows; "
                f"levels (level, checked, differing) {mine['levels']}; {split}"
            )
            print(
                f"  reladiff: {med['reladiff']:8.2f} s (median of {len(times['reladiff'])}); "
                f"{theirs['differing']:,} rows differ"
            )
            print(
                f"  counts {'agree' if agree else 'DISAGREE'} (backfill {mine['differing']:,}, "
                f"reladiff {theirs['differing']:,}, changed by the case {expected:,})"
            )
            met = ratio >= TARGETS[case]
            print(
                f"target backfill >= {TARGETS[case]:g}x faster than reladiff, ({case}): "
                f"{'met' if met else 'not met'} ({ratio:.2f}x)"
            )
            if case == "a":
                rate = n / med["backfill"]
                print(
                    f"  rows/s (rows of one table / s): backfill {rate / 1e6:.2f}M, reladiff "
                    f"{n / med['reladiff'] / 1e6:.2f}M; data-diff's anchor (25M rows in "
                    f"< 10 s) {ANCHOR_ROWS_PER_S / 1e6:.1f}M: "
                    f"{'met' if rate >= ANCHOR_ROWS_PER_S else 'not met'}"
                )
            results[case] = {"median": med, "ratio": ratio, "agree": agree, **mine}
            duck.unlink()
        print("all counts agree" if ok else "COUNTS DISAGREE")
        if args.json:
            print(json.dumps(results, default=str))
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
