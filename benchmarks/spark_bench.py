"""Spark engine benchmark: backfill vs one plain Spark job, audit vs a FULL OUTER JOIN diff.

    python benchmarks/spark_bench.py            # ~1M order lines a day is --orders-per-day 4000
    python benchmarks/spark_bench.py --quick    # small, for the test suite

1. The shop's fct_daily_sales+ backfilled (audit branch, the default batching, concurrency 2)
   over DAYS days, against plain Spark jobs doing the same work: each of the three selected
   models (fct_daily_sales, fct_sales_7d, fct_monthly_sales) rebuilt over the period in one
   overwrite each. (Until 2026-12-03 the baseline rebuilt fct_daily_sales only, a third of the
   backfill's work.) Target: <= 1.5x.
2. The audit of a backfill where 10% of the partitions differ (fingerprints, then the C++ diff of
   the differing partitions) against a Spark FULL OUTER JOIN of old and new over the same periods,
   collected to the driver. Target: >= 3x faster. The driver's peak RSS (Python and JVM) is shown.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb

import backfill
from backfill.examples import shop


def _jvm_peak_mb() -> float:
    """Peak RSS (MB) of the driver JVM (a child of this process), from /proc."""
    best = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if "java" in text.split("\n", 1)[0] and f"PPid:\t{__import__('os').getpid()}" in text:
            m = re.search(r"VmHWM:\s+(\d+) kB", text)
            best = max(best, int(m.group(1)) / 1024 if m else 0.0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--orders-per-day", type=int, default=None)
    ap.add_argument("--days", type=int, default=None)
    args = ap.parse_args()
    per_day = args.orders_per_day or (30 if args.quick else 4000)
    days = args.days or (10 if args.quick else 89)
    root = Path(tempfile.mkdtemp(prefix="spark_bench_")) / "shop"
    try:
        shop.create(root, orders_per_day=per_day)
        yml = root / "backfill.yml"
        yml.write_text(re.sub(r"engine:\n(?:  .*\n)+",
                              "engine:\n  type: spark\n  master: 'local[2]'\n  catalog: iceberg\n"
                              "  conf: {spark.ui.enabled: 'false', "
                              "spark.sql.shuffle.partitions: '2'}\n", yml.read_text()))
        p = backfill.Project.load(root)
        from backfill.engines.spark import SparkEngine

        assert p.settings is not None
        engine = SparkEngine.from_settings(p.settings.engine)
        con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
        for t in ("orders", "order_items"):
            engine.load_table(t, con.sql(f"SELECT * FROM raw.{t}").to_arrow_table(),
                              event_time="ordered_at")
        con.close()
        # fix day = 1 Aug; the audited span has 10% of its days after it
        first = dt.date(2026, 8, 1) - dt.timedelta(days=days - max(1, days // 10))
        last = first + dt.timedelta(days=days)
        build_from = (first.replace(day=1) - dt.timedelta(days=1)).replace(day=1)
        plan = p.plan("*", build_from.isoformat(), (last + dt.timedelta(days=31)).replace(
            day=1).isoformat(), as_of="2026-12-01", partitions_per_run=31)
        assert p.backfill(plan, reason="build", direct=True, engine=engine).run(concurrency=2).ok
        shop.fix(root)
        p = backfill.Project.load(root)

        began = time.perf_counter()
        bf = p.backfill(p.plan("fct_daily_sales+", first.isoformat(), last.isoformat(),
                               as_of="2026-12-01"), reason="bench", engine=engine)
        assert bf.run(concurrency=2, backoff=0.0).ok
        t_backfill = time.perf_counter() - began
        spark = engine.spark  # type: ignore[attr-defined]
        from pyspark.sql import functions as F
        utc = dt.timezone.utc
        month0 = first.replace(day=1)
        month1 = (last - dt.timedelta(days=1)).replace(day=1) + dt.timedelta(days=31)
        month1 = month1.replace(day=1)
        # The same work as the backfill's: each selected model rebuilt over the period in one
        # overwrite (the monthly model over the months the period touches), in dependency order.
        jobs = [("fct_daily_sales", "sales_date", first, last, "days"),
                ("fct_sales_7d", "sales_date", first, last, "days"),
                ("fct_monthly_sales", "sales_month", month0, month1, "months")]
        began = time.perf_counter()
        for m, key, lo, hi, transform in jobs:
            sql = engine.render(p, m, dt.datetime.combine(lo, dt.time(), utc),
                                dt.datetime.combine(hi, dt.time(), utc),
                                backfill.engines.PUBLISHED)
            plain = engine.table(f"plain_{m}")  # type: ignore[attr-defined]
            spark.sql(f"CREATE TABLE IF NOT EXISTS {plain} USING iceberg PARTITIONED BY "
                      f"({transform}({key})) AS SELECT * FROM "
                      f"{engine.table(m)} WHERE FALSE")  # type: ignore[attr-defined]
            spark.sql(sql).writeTo(plain).overwrite(
                F.expr(f"{key} >= DATE '{lo}' AND {key} < DATE '{hi}'"))
        t_plain = time.perf_counter() - began

        began = time.perf_counter()
        report = bf.audit()
        t_audit = time.perf_counter() - began
        began = time.perf_counter()
        for m, key, lo, hi, _ in jobs:  # the partitions the audit compares
            t = engine.table(m)  # type: ignore[attr-defined]
            where = f"{key} >= DATE '{lo}' AND {key} < DATE '{hi}'"
            spark.sql(f"SELECT * FROM (SELECT * FROM {t} WHERE {where}) o FULL OUTER JOIN "
                      f"(SELECT * FROM {t}.`branch_audit_{bf.id}` WHERE {where}) n "
                      f"ON o.{key} = n.{key} WHERE NOT (struct(o.*) <=> struct(n.*))").toArrow()
        t_join = time.perf_counter() - began
        py_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        r1, r2 = t_backfill / t_plain, t_join / t_audit
        print(f"spark bench ({'quick' if args.quick else 'full'}): {per_day} orders/day, "
              f"{days} days, audit passed={report.passed}")
        print(f"  backfill {t_backfill:.1f} s vs plain Spark jobs {t_plain:.1f} s: "
              f"{r1:.2f}x (target <= 1.5x: {'met' if r1 <= 1.5 else 'NOT met'})")
        print(f"  audit {t_audit:.1f} s vs FULL OUTER JOIN diff {t_join:.1f} s: {r2:.2f}x faster "
              f"(target >= 3x: {'met' if r2 >= 3 else 'NOT met'})")
        print(f"  driver peak RSS: Python {py_peak:.0f} MB, JVM {_jvm_peak_mb():.0f} MB")
        return 0
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
