"""Streamed diff: peak memory follows the largest partition pair, not the number of differing
partitions (issue 18, target 3).

    python benchmarks/diff_stream_bench.py                # 30 days x 1M rows, 3 repeats
    python benchmarks/diff_stream_bench.py --quick        # 8 days x 40k rows, one run (the test)

Workload: a DuckDB file with two versions of a fact table (line_id, day, qty, price, amount,
sku) in which EVERY day differs: 2% of rows change qty, 0.1% move to the next day (their key
leaves one pair and arrives in the next), 0.1% are deleted, 0.2% added. Each competitor is a
fresh child process reading the versions from DuckDB as Arrow, as the audit does:

* stream-1: ``DiffStream`` over the first day only (one pair: the memory floor);
* stream-N: ``DiffStream`` over all N days, one day's pair fetched, fed and released at a time;
* whole-N: ``backfill.diff`` of all N days as one Arrow stream per side (the audit before).

stream-N and whole-N must give the same result (summary, per-column counts, per-partition
table; float sums up to rounding), checked before anything is reported. Peak RSS is the
child's VmHWM, DuckDB's buffer pool capped at 32 MB (its cached pages are not the diff's).
Target: stream-N peak RSS <= 1.5 x stream-1's (memory follows the largest pair).

Where the time goes (6 days x 1M rows, the diff's own ``timings``): streamed 4.03 s in C++ of
6.49 s (the rest is DuckDB producing Arrow), of which 0.41 s is the per-pair carry (keys sorted
and coded, unmatched rows taken) and 6 ms the final recurrence check; the one call 4.21 s of
6.60 s: the concatenated days are not key-ordered once keys move, so it takes the hash match
(0.64 s) where each day's pair merges in key order (0.08 s in all).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_RSS_RATIO = 1.5
START = dt.date(2024, 1, 1)


def build(path: Path, days: int, per_day: int) -> None:
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("SET threads = 2")
    n = days * per_day
    con.execute(f"""
        CREATE TABLE old AS SELECT i AS line_id,
            DATE '{START}' + CAST(i // {per_day} AS INTEGER) AS day,
            CAST(i * 7 % 13 AS INTEGER) AS qty, (i % 1000) / 7.0 AS price,
            CAST((i % 5000) / 100.0 AS DECIMAL(18, 2)) AS amount, 'sku' || (i % 997) AS sku
        FROM range({n}) t(i)""")
    last = START + dt.timedelta(days=days - 1)
    con.execute(f"""
        CREATE TABLE new AS
        SELECT line_id,
               CASE WHEN line_id % 1000 = 1 AND day < DATE '{last}' THEN day + 1 ELSE day END
                   AS day,
               CASE WHEN line_id % 50 = 0 THEN qty + 1 ELSE qty END AS qty, price, amount, sku
        FROM old WHERE line_id % 1000 <> 7
        UNION ALL
        SELECT {n} + i, DATE '{START}' + CAST(i * 500 // {per_day} AS INTEGER), 1, 1.5,
               1.25, 'added'
        FROM range({n // 500}) t(i)
        ORDER BY day, line_id""")
    con.close()


def _peak_rss_mb() -> float:
    m = re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())
    if m is None:
        raise RuntimeError("no VmHWM in /proc/self/status")
    return int(m.group(1)) / 1024


def run_child(which: str, path: Path, days: int) -> dict[str, Any]:
    import duckdb

    import backfill
    from backfill.audit.diff import DiffStream

    con = duckdb.connect(str(path), read_only=True)
    con.execute("SET threads = 2")
    # DuckDB's buffer pool keeps the pages it read, up to its memory limit, for every
    # competitor: capped low (32 MB; DIFF_STREAM_BENCH_DUCKDB_MB) so the peak RSS is the diff's.
    # At 128 MB, 12 days x 1M rows streamed peaked at 382 MB against 249 MB for one day, the
    # difference being DuckDB's cached pages of the 12 days (286 MB at 32 MB).
    con.execute(f"SET memory_limit = '{os.environ.get('DIFF_STREAM_BENCH_DUCKDB_MB', '32')}MB'")
    opts: dict[str, Any] = {"partition_by": "day", "on_duplicate": "report"}

    def reader(table: str, lo: dt.date, hi: dt.date) -> Any:
        # A relation, as the DuckDB engine's stream() yields: its Arrow C stream is read batch
        # by batch by the import.
        return con.sql(f"SELECT * FROM {table} WHERE day >= DATE '{lo}' AND day < DATE '{hi}'")

    began = time.perf_counter()
    if which == "whole":
        end = START + dt.timedelta(days=days)
        result = backfill.diff(
            reader("old", START, end), reader("new", START, end), "line_id", **opts
        )
    else:
        stream = DiffStream("line_id", **opts)
        for d in range(days):
            lo = START + dt.timedelta(days=d)
            hi = lo + dt.timedelta(days=1)
            stream.add(reader("old", lo, hi), reader("new", lo, hi))
        finished = stream.finish()
        assert finished is not None, "no duplicated key in this workload"
        result = finished
    seconds = time.perf_counter() - began

    def plain(v: Any) -> Any:
        return float(v) if isinstance(v, float) or type(v).__name__ == "Decimal" else v

    return {
        "seconds": seconds,
        "peak_mb": _peak_rss_mb(),
        "summary": result.summary.to_dict(),
        "columns": [{k: plain(v) for k, v in r.items()} for r in result.columns.to_pylist()],
        "partitions": [
            {k: plain(v) for k, v in r.items() if k not in ("start", "end")}
            for r in result.partitions.to_pylist()
        ],
    }


def child(which: str, path: Path, days: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", which, "--db", str(path), "--days", str(days)],
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def agree(stream: dict[str, Any], whole: dict[str, Any]) -> None:
    """Raises unless the streamed and the whole diff gave the same result."""
    for part in ("summary", "columns", "partitions"):
        if not _same(stream[part], whole[part]):
            raise AssertionError(
                f"stream and whole differ in {part}:\n{stream[part]}\n{whole[part]}"
            )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--days", type=int)
    ap.add_argument("--rows-per-day", type=int)
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--child")
    ap.add_argument("--db")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(args.child, Path(args.db), args.days)))
        return {}
    days = args.days or (8 if args.quick else 30)
    per_day = args.rows_per_day or (40_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory(prefix="diff_stream_bench_") as tmp:
        path = Path(tmp) / "fact.duckdb"
        began = time.perf_counter()
        build(path, days, per_day)
        print(
            f"{days} days x {per_day:,} rows per day, every day differing; built in "
            f"{time.perf_counter() - began:.1f} s",
            flush=True,
        )
        runs: dict[str, list[dict[str, Any]]] = {"stream-1": [], "stream-N": [], "whole-N": []}
        for _ in range(repeats):  # interleaved
            runs["stream-1"].append(child("stream", path, 1))
            runs["stream-N"].append(child("stream", path, days))
            runs["whole-N"].append(child("whole", path, days))
        for s, w in zip(runs["stream-N"], runs["whole-N"], strict=True):
            agree(s, w)
    med = {
        k: {m: statistics.median(r[m] for r in v) for m in ("seconds", "peak_mb")}
        for k, v in runs.items()
    }
    rss_ratio = med["stream-N"]["peak_mb"] / med["stream-1"]["peak_mb"]
    print(f"load average {os.getloadavg()}")
    print(f"{'competitor':<10} {'seconds':>9} {'peak RSS MB':>12}   (median of {repeats})")
    for k in runs:
        print(
            f"{k.replace('N', str(days)):<10} {med[k]['seconds']:>9.2f} {med[k]['peak_mb']:>12.0f}"
        )
    print(
        f"peak RSS: stream-{days} / stream-1 = {rss_ratio:.2f} (target <= "
        f"{TARGET_RSS_RATIO}: {'met' if rss_ratio <= TARGET_RSS_RATIO else 'NOT met'}); "
        f"whole-{days} / stream-{days} = "
        f"{med['whole-N']['peak_mb'] / med['stream-N']['peak_mb']:.2f}"
    )
    print(
        f"time: stream-{days} / whole-{days} = "
        f"{med['stream-N']['seconds'] / med['whole-N']['seconds']:.2f}"
    )
    print("results: stream and whole agree (summary, columns, partitions)")
    return {"medians": med, "rss_ratio": rss_ratio, "days": days}


if __name__ == "__main__":
    main()
