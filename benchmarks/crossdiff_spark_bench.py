"""diff_tables with a Spark/Iceberg side: a fact table in Iceberg against its copy in a DuckDB file
with one day changed, compared by canonical fingerprints computed in each engine (only the
differing day is streamed), against reading both tables whole into Arrow and diffing them
(backfill.diff): what a diff across warehouses costs without the pushdown.

    python benchmarks/crossdiff_spark_bench.py             # 2M rows over 30 days, median of 3
    python benchmarks/crossdiff_spark_bench.py --quick     # 30k rows over 10 days, once

Both give the same DiffResult (checked). Spark runs local[2] with a 2 GB driver; the table is
partitioned by day in an Iceberg folder catalog. The fingerprint of a Spark side is an MD5 per
row in Spark SQL (the canonical row encoding), so its cost grows with the rows; the whole read
grows with the rows too, and with their width on the wire.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

import backfill
from backfill.engines.locations import open_table

CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
}
CHANGED_DAY = 10


@dataclass
class Result:
    rows: int
    days: int
    t_pushdown: float  # median
    t_whole: float  # median
    streamed: list[str]
    changed: int
    same: bool  # both ways give the same DiffResult
    timings: dict[str, float] = field(default_factory=dict)  # of the last pushdown run

    def lines(self) -> list[str]:
        shown = {k: v for k, v in self.timings.items() if not k.startswith("diff ")}
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in shown.items())
        return [
            f"crossdiff spark bench: {self.rows:,} rows over {self.days} days, Iceberg (Spark "
            f"local[2]) vs DuckDB, {self.changed:,} rows changed in {len(self.streamed)} day(s) "
            f"({', '.join(self.streamed)}); same result both ways: {self.same}",
            f"  diff_tables (fingerprints in each engine, differing days streamed): "
            f"{self.t_pushdown:.2f} s ({parts})",
            f"  both tables read whole into Arrow + backfill.diff: {self.t_whole:.2f} s "
            f"({self.t_whole / self.t_pushdown:.2f}x the pushdown)",
            f"  load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
        ]


def build(folder: Path, rows: int, days: int, engine: Any) -> tuple[str, str]:
    """The table in Iceberg (``x.sales``, partitioned by day) and in DuckDB, where one day's
    every tenth row has its amount one higher; the two locations."""
    db = folder / "sales.duckdb"
    con = duckdb.connect(str(db))
    try:
        con.execute(
            f"""CREATE TABLE main.sales AS SELECT
                  i AS id,
                  TIMESTAMPTZ '2024-03-01 00:00:00+00'
                    + to_days(CAST(i % {days} AS INTEGER))
                    + to_seconds((i * 37) % 86400) AS at,
                  CAST((i % 100000) / 100 AS DECIMAL(18,2)) AS amount,
                  CAST(i % 13 AS INTEGER) AS qty,
                  'note ' || (i % 1000) AS note
                FROM range({rows}) t(i)"""
        )
        engine.load_table(
            "sales",
            con.sql("SELECT * FROM main.sales").to_arrow_reader(),
            schema="x",
            event_time="at",
        )
        con.execute(
            f"UPDATE main.sales SET amount = amount + 1 "
            f"WHERE id % {days} = {CHANGED_DAY} AND id % 10 = 0"
        )
    finally:
        con.close()
    return f"iceberg://{engine.catalog_props['warehouse']}#x.sales", f"duckdb://{db}#main.sales"


def whole(location: str) -> Any:
    """Every row at ``location`` as Arrow, its zoned timestamps labelled UTC (DuckDB says
    Etc/UTC, which the diff would report as a retyped column), as diff_tables streams them."""
    import pyarrow as pa

    with open_table(location) as src:
        table = src.arrow(f"SELECT * FROM {src.relation} t")
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit, "UTC"))
        if pa.types.is_timestamp(f.type) and f.type.tz is not None
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def measure(folder: Path, rows: int, days: int, repeat: int, engine: Any) -> Result:
    a, b = build(folder, rows, days, engine)
    backfill.diff_tables(a, b, "id", partition_by="at")  # warm-up: plans, JIT, caches
    t_push, t_whole = [], []
    got = want = None
    for _ in range(repeat):  # interleaved: the machine's load hits both alike
        t = time.perf_counter()
        got = backfill.diff_tables(a, b, "id", partition_by="at")
        t_push.append(time.perf_counter() - t)
        t = time.perf_counter()
        old, new = whole(a), whole(b)
        want = backfill.diff(old, new, "id", partition_by="at")
        t_whole.append(time.perf_counter() - t)
    assert got is not None and want is not None
    same = (
        got.summary == want.summary
        and got.partitions.to_pylist() == want.partitions.to_pylist()
        and got.changed_sample.to_pylist() == want.changed_sample.to_pylist()
    )
    return Result(
        rows,
        days,
        statistics.median(t_push),
        statistics.median(t_whole),
        got.streamed,
        got.summary.changed,
        same,
        got.timings,
    )


def spark_engine(folder: Path, conf: dict[str, str] | None = None) -> Any:
    from backfill.engines.spark import SparkEngine

    (folder / "iceberg").mkdir(exist_ok=True)
    return SparkEngine(folder / "iceberg", master="local[2]", conf=conf or CONF)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="30k rows over 10 days, once")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rows, days, repeat = (30_000, 12, 1) if args.quick else (args.rows, args.days, args.repeat)
    with tempfile.TemporaryDirectory(prefix="crossdiff_spark_bench_") as tmp:
        folder = Path(tmp)
        result = measure(folder, rows, days, repeat, spark_engine(folder))
    print("\n".join(result.lines()))
    if not result.same:
        raise SystemExit("diff_tables and the whole-table diff disagree")


if __name__ == "__main__":
    main()
