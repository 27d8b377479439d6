"""The shop backfill on PostgreSQL against the same backfill on DuckDB, side by side.

    python benchmarks/postgres_bench.py            # 240 orders a day, median of 3
    python benchmarks/postgres_bench.py --quick    # 12 orders a day, once
    python benchmarks/postgres_bench.py --url postgresql://me@db/bench   # a server you name

Both engines get the same shop (raw rows generated once, copied into Postgres through ADBC),
built with the discount bug; then, on a fresh copy each time (a DuckDB file copy; a Postgres
``CREATE DATABASE ... TEMPLATE``), the fix's backfill ``fct_daily_sales+`` 2026-08-01..2026-10-29
runs (187 tasks, concurrency 8), is audited and published. The benchmark checks that both
engines publish the same fct_daily_sales rows and prints the medians and the ratio Postgres /
DuckDB. There is no target: the figure says what the network round trips and Postgres' row store
cost against an embedded column store on this machine. Without ``--url`` it starts a throwaway
server (the tests' ``pg_support``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

import backfill
from backfill.engines import PUBLISHED
from backfill.engines.registry import engine_for
from backfill.examples import shop
from backfill.examples.shop import postgres as shop_pg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from pg_engine_support import ensure_entry_point
from pg_support import PgServer

AS_OF = "2026-12-01"
SELECT, START, END = "fct_daily_sales+", "2026-08-01", "2026-10-29"
STEPS = ("build", "run", "audit", "publish")


def build(root: Path, concurrency: int) -> float:
    p = backfill.Project.load(root)
    plan = p.plan("*", "2026-01-01", "2026-12-01", as_of=AS_OF, partitions_per_run=31)
    began = time.perf_counter()
    status = p.backfill(plan, reason="initial build", direct=True).run(concurrency=concurrency)
    if not status.ok:
        raise SystemExit(str(status))
    return time.perf_counter() - began


def backfill_fix(root: Path, concurrency: int) -> tuple[dict[str, float], list[tuple[Any, ...]]]:
    """Runs, audits and publishes the fix; returns the seconds per step and the published
    fct_daily_sales rows of the backfilled period."""
    shop.fix(root)
    p = backfill.Project.load(root)
    plan = p.plan(SELECT, START, END, as_of=AS_OF, concurrency=concurrency)
    bf = p.backfill(plan, reason="bench")
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    status = bf.run(concurrency=concurrency)
    seconds["run"] = time.perf_counter() - began
    if not status.ok:
        raise SystemExit(str(status))
    began = time.perf_counter()
    report = bf.audit()
    seconds["audit"] = time.perf_counter() - began
    if not report.passed:
        raise SystemExit(str(report))
    began = time.perf_counter()
    bf.publish("bench")
    seconds["publish"] = time.perf_counter() - began
    engine = engine_for(p)
    try:
        with engine.stream(p, "fct_daily_sales", PUBLISHED, None) as s:
            rows = backfill.ArrowTable.from_arrow(s).to_pylist()
    finally:
        engine.close()
    published = sorted(
        (r["sales_date"], int(r["orders"]), int(r["units"]), r["revenue"]) for r in rows
    )
    return seconds, published


def clone_database(url: str, template: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    server = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
            "AND pid <> pg_backend_pid()",
            [template],
        )
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return url.rsplit("/", 1)[0] + "/" + name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, one repeat")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument(
        "--url",
        help="a database on a server you name: the benchmark creates "
        "databases next to it (default: a throwaway server)",
    )
    ap.add_argument("--json", action="store_true", help="a JSON line with the results last")
    args = ap.parse_args()
    per_day = 12 if args.quick else 240
    repeat = args.repeat or (1 if args.quick else 3)
    ensure_entry_point()
    server = None if args.url else PgServer.start()
    base_url = args.url or server.create_database("bench")  # type: ignore[union-attr]
    work = Path(tempfile.mkdtemp(prefix="pg_bench_"))
    try:
        times: dict[str, dict[str, list[float]]] = {
            e: {s: [] for s in STEPS} for e in ("duckdb", "postgres")
        }
        built_duck = shop.create(work / "duck", orders_per_day=per_day)
        times["duckdb"]["build"].append(build(built_duck, args.concurrency))
        built_pg = shop_pg.create(work / "pg", base_url, orders_per_day=per_day)
        times["postgres"]["build"].append(build(built_pg, args.concurrency))
        template = base_url.rsplit("/", 1)[1]
        same = True
        for i in range(repeat):
            duck = shutil.copytree(
                built_duck, work / f"duck{i}", ignore=shutil.ignore_patterns(".backfill")
            )
            d_sec, d_rows = backfill_fix(duck, args.concurrency)
            url = clone_database(base_url, template)
            pg = shutil.copytree(
                built_pg, work / f"pg{i}", ignore=shutil.ignore_patterns(".backfill")
            )
            yml = pg / "backfill.yml"
            yml.write_text(yml.read_text().replace(base_url, url))
            p_sec, p_rows = backfill_fix(pg, args.concurrency)
            same = same and d_rows == p_rows and len(d_rows) > 0
            for step in ("run", "audit", "publish"):
                times["duckdb"][step].append(d_sec[step])
                times["postgres"][step].append(p_sec[step])
        med = {e: {s: statistics.median(v) for s, v in steps.items()} for e, steps in times.items()}
        ratio = {s: med["postgres"][s] / med["duckdb"][s] for s in STEPS}
        print(
            f"the shop ({per_day} orders a day): backfill {SELECT} {START}..{END}, 187 tasks "
            f"at concurrency {args.concurrency}; median of {repeat} (build: once)"
        )
        print(f"  {'step':<8} {'duckdb':>9} {'postgres':>9}  ratio pg/duckdb")
        for s in STEPS:
            print(f"  {s:<8} {med['duckdb'][s]:8.2f}s {med['postgres'][s]:8.2f}s  {ratio[s]:.2f}")
        total = {e: sum(med[e][s] for s in ("run", "audit", "publish")) for e in med}
        print(
            f"  {'total':<8} {total['duckdb']:8.2f}s {total['postgres']:8.2f}s  "
            f"{total['postgres'] / total['duckdb']:.2f}  (run + audit + publish; no target)"
        )
        print(f"published fct_daily_sales identical on both engines: {same}")
        if args.json:
            print(
                json.dumps(
                    {
                        "identical": same,
                        "median": med,
                        "ratio": ratio,
                        "ratio_total": total["postgres"] / total["duckdb"],
                        "orders_per_day": per_day,
                    }
                )
            )
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
