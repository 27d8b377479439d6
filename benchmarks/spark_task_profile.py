"""Per-task overhead of the Spark engine: Spark jobs, py4j round trips and seconds per run_task.

    python benchmarks/spark_task_profile.py [--tasks 8] [--orders-per-day 12]

Builds a small shop on Spark (local[2], like the tests), then runs fct_daily_sales day tasks
straight through ``engine.run_task``: first directly into main, then into an audit branch (the
first task of which creates the branch). Jobs are counted with Spark's status tracker, py4j
round trips by counting the gateway client's commands. The data is tiny on purpose: what is
left is the engine's fixed cost per task.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

import backfill
from backfill.engines import PUBLISHED, Area
from backfill.examples import shop

UTC = dt.timezone.utc
CONF = (
    "{spark.ui.enabled: 'false', spark.sql.shuffle.partitions: '2', spark.default.parallelism: '2'}"
)


class Counter:
    """py4j commands sent by this process (every Python -> JVM call is one)."""

    def __init__(self) -> None:
        from py4j.clientserver import ClientServerConnection

        self.n = 0
        original = ClientServerConnection.send_command

        def send_command(conn: Any, command: str) -> Any:
            self.n += 1
            return original(conn, command)

        ClientServerConnection.send_command = send_command  # type: ignore[method-assign]


def _cpu(spark: Any) -> float:
    """CPU seconds used so far by the driver JVM and this process (the machine may be shared:
    CPU time varies less than wall time)."""
    import os

    pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    mine = os.times()
    return (int(fields[11]) + int(fields[12])) / tick + mine.user + mine.system


def _jobs(spark: Any) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--orders-per-day", type=int, default=12)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="spark_prof_")) / "shop"
    try:
        shop.create(root, orders_per_day=args.orders_per_day)
        yml = root / "backfill.yml"
        yml.write_text(
            re.sub(
                r"engine:\n(?:  .*\n)+",
                "engine:\n  type: spark\n  master: 'local[2]'\n  catalog: iceberg\n"
                f"  conf: {CONF}\n",
                yml.read_text(),
            )
        )
        p = backfill.Project.load(root)
        from backfill.engines.spark import SparkEngine

        assert p.settings is not None
        engine = SparkEngine.from_settings(p.settings.engine)
        con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
        for t in ("orders", "order_items"):
            engine.load_table(
                t,
                con.sql(
                    f"SELECT * FROM raw.{t} WHERE ordered_at >= "
                    "'2026-07-01' AND ordered_at < '2026-09-01'"
                ).to_arrow_table(),
                event_time="ordered_at",
            )
        con.close()
        plan = p.plan("*", "2026-07-01", "2026-09-01", as_of="2026-12-01", partitions_per_run=31)
        assert p.backfill(plan, reason="build", direct=True, engine=engine).run(concurrency=2).ok
        shop.fix(root)
        p = backfill.Project.load(root)
        spark: Any = engine.spark
        counter = Counter()
        days = [
            dt.datetime(2026, 8, 1, tzinfo=UTC) + dt.timedelta(days=i) for i in range(args.tasks)
        ]
        audit = Area("bf_prof", {"fct_daily_sales": [(d, d + dt.timedelta(days=1)) for d in days]})
        print(f"fct_daily_sales, {args.tasks} day tasks ({args.orders_per_day} orders/day)")
        from pyspark.sql import functions as F

        table = engine.table("fct_daily_sales")

        def plain(d: dt.datetime, _: Area) -> None:
            """The task's SELECT written with one overwrite, nothing else: the floor."""
            sql = engine.render(p, "fct_daily_sales", d, d + dt.timedelta(days=1), PUBLISHED)
            spark.sql(sql).writeTo(table).overwrite(
                F.expr(
                    f"sales_date >= DATE '{d:%Y-%m-%d}' AND sales_date < DATE "
                    f"'{d + dt.timedelta(days=1):%Y-%m-%d}'"
                )
            )

        def task(d: dt.datetime, area: Area) -> None:
            engine.run_task(p, "fct_daily_sales", d, d + dt.timedelta(days=1), area)

        for name, run, area in (
            ("plain overwrite", plain, PUBLISHED),
            ("direct (main)", task, PUBLISHED),
            ("audit branch", task, audit),
        ):
            secs, jobs, calls, cpu = [], [], [], []
            for d in days:
                j0, u0 = _jobs(spark), _cpu(spark)
                c0, t0 = counter.n, time.perf_counter()
                run(d, area)
                secs.append(time.perf_counter() - t0)
                calls.append(counter.n - c0)
                cpu.append(_cpu(spark) - u0)
                ids = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
                jobs.append(len(ids) - j0)
            tracker = spark.sparkContext.statusTracker()
            stages = [
                str(tracker.getStageInfo(s).name) if tracker.getStageInfo(s) else "?"
                for j in sorted(ids)[-jobs[-1] :]
                for s in (tracker.getJobInfo(j).stageIds[-1:] if tracker.getJobInfo(j) else [])
            ]
            print(
                f"  {name:15} per task: median {statistics.median(secs):.2f} s "
                f"(first {secs[0]:.2f} s), CPU median {statistics.median(cpu):.2f} s, "
                f"Spark jobs {jobs}, py4j calls {calls}"
            )
            print(f"    jobs of the last task: {stages}")
        return 0
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
