"""backfill.fingerprint against DuckDB sum(hash(...)) on the diff benchmark's table.

    python benchmarks/fingerprint_bench.py            # 10 M rows x 10 columns
    python benchmarks/fingerprint_bench.py --quick    # 200 k rows, one run (the test suite)

Prints the throughput per core (input buffer bytes / seconds / threads) with one and with all
threads, DuckDB's time for an order-independent sum of row hashes, and the ratio.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable

import pyarrow as pa

import backfill

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diff_bench import make_tables, table_bytes


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args(argv)
    n = args.rows or (200_000 if args.quick else 10_000_000)
    repeat = args.repeat or (1 if args.quick else 5)
    table, shuffled_source = make_tables(n)
    del shuffled_source
    size = table_bytes(table)
    cores = os.cpu_count() or 1
    print(f"table: {table.num_rows:,} rows x {table.num_columns} columns, {size / 1e9:.2f} GB")

    t1 = median_time(lambda: backfill.fingerprint(table, threads=1), repeat)
    tn = median_time(lambda: backfill.fingerprint(table), repeat)
    print(f"backfill, 1 thread:  {t1:.3f} s = {size / t1 / 1e9:.2f} GB/s per core")
    print(f"backfill, {cores} threads: {tn:.3f} s = {size / tn / 1e9 / cores:.2f} GB/s per core")

    import duckdb

    con = duckdb.connect()
    con.execute(f"set threads to {cores}")
    con.register("t", table)
    cols = ", ".join(table.column_names)
    sql = f"select count(*), sum(hash({cols})) from t"
    td = median_time(lambda: con.execute(sql).fetchall(), repeat)
    print(f"duckdb sum(hash(...)), {cores} threads: {td:.3f} s")
    print(f"ratio duckdb / backfill ({cores} threads): {td / tn:.2f}x")

    # Sanity: the fingerprint ignores row order and chunking, as DuckDB's sum does.
    shuffled = table.slice(n // 2).combine_chunks()
    both = pa.concat_tables([shuffled, table.slice(0, n // 2)])
    same = backfill.fingerprint(both) == backfill.fingerprint(table)
    print(f"order/chunking invariance check: {'ok' if same else 'FAILED'}")
    per_core = size / t1 / 1e9
    print(
        f"target >= 1.5 GB/s per core: {'met' if per_core >= 1.5 else 'NOT met'} "
        f"({per_core:.2f} GB/s)"
    )
    print(f"target faster than DuckDB: {'met' if td > tn else 'NOT met'} ({td / tn:.2f}x)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
