"""The shop backfill on PostgreSQL against the same backfill on DuckDB, side by side.

    python benchmarks/postgres_bench.py            # 240 orders a day, median of 3
    python benchmarks/postgres_bench.py --orders-per-day 4000 --repeat 1
    python benchmarks/postgres_bench.py --demo     # also `backfill demo` on both, as users run it
    python benchmarks/postgres_bench.py --quick    # 12 orders a day, once
    python benchmarks/postgres_bench.py --url postgresql://me@db/bench   # a server you name

Both engines get the same shop (raw rows generated once, copied into Postgres through ADBC),
built with the discount bug; then, on a fresh copy each time (a DuckDB file copy; a Postgres
``CREATE DATABASE ... TEMPLATE``), the fix's backfill ``fct_daily_sales+`` 2026-08-01..2026-10-29
runs (187 tasks, concurrency 8), is audited and published. The benchmark checks that both
engines publish the same fct_daily_sales rows and prints the medians and the ratio Postgres /
DuckDB. The backfill's total has no target: the figure says what the network round trips and
Postgres' row store cost against an embedded column store on this machine.

Targets (issue 31), each with a met / not met line:
- the initial build (``--select "*"`` 2026-01-01..2026-12-01, 31 partitions a task, the shop's
  README's build) on Postgres <= 3x DuckDB's, at 240 and at 4,000 orders a day
  (``--orders-per-day``); the builds run ``--repeat`` times too (a new copy of the raw data each
  time: a fresh database from a template, a copied DuckDB file), interleaved, medians compared;
- with ``--demo``: ``backfill demo --engine postgres`` within 4x of ``backfill demo`` on DuckDB,
  each run as users run it (the installed ``backfill`` in a new process), interleaved, medians.

Beside the build, each warehouse's floor (``plain``): every model rebuilt over the build's window
by one plain ``CREATE TABLE ... AS`` of its SELECT, parents first, on a copy of the built shop
(no tasks, ledger, fingerprints or statistics); the build's ratio to its own floor on each engine
says how much of the Postgres / DuckDB gap is the warehouse's.

Without ``--url`` it starts a throwaway server (the tests' ``pg_support``: fsync off).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import subprocess
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
BUILD = ("2026-01-01", "2026-12-01")  # the initial build's window (the shop's README)
UTC = dt.timezone.utc
SELECT, START, END = "fct_daily_sales+", "2026-08-01", "2026-10-29"
STEPS = ("build", "plain", "run", "audit", "publish")
BUILD_TARGET = 3.0  # Postgres' initial build over DuckDB's
DEMO_TARGET = 4.0  # `backfill demo --engine postgres` over `backfill demo`


def build(root: Path, concurrency: int) -> float:
    p = backfill.Project.load(root)
    plan = p.plan("*", *BUILD, as_of=AS_OF, partitions_per_run=31)
    began = time.perf_counter()
    status = p.backfill(plan, reason="initial build", direct=True).run(concurrency=concurrency)
    if not status.ok:
        raise SystemExit(str(status))
    return time.perf_counter() - began


def plain_build(root: Path) -> float:
    """The warehouse's own floor for the build: every model rebuilt over the build's window by
    one plain ``CREATE TABLE ... AS`` of its SELECT, parents first, on one connection (what a
    user would run by hand: no tasks, ledger, fingerprints or statistics). Reads the built
    tables (the same rows the build read); run after :func:`build` on the same copy. Fails
    unless each plain table holds exactly the built table's rows: a floor that computed
    something else would measure nothing."""
    p = backfill.Project.load(root)
    engine = engine_for(p)
    lo, hi = (dt.datetime.combine(dt.date.fromisoformat(d), dt.time(), UTC) for d in BUILD)
    try:
        sql = [(m, engine.render(p, m, lo, hi, PUBLISHED)) for m in p.topological_order()]
        with engine.connect() as db:
            began = time.perf_counter()
            for m, select in sql:
                db.execute(f"CREATE TABLE plain_{m} AS {select}")
            seconds = time.perf_counter() - began
            for m, _ in sql:
                built = engine.relation(m, PUBLISHED, p)
                differ = db.execute(
                    f"SELECT count(*) FROM ((SELECT * FROM plain_{m} EXCEPT ALL SELECT * FROM "
                    f"{built}) UNION ALL (SELECT * FROM {built} EXCEPT ALL SELECT * FROM "
                    f"plain_{m})) d"
                ).fetchone()[0]
                if differ:
                    raise SystemExit(f"plain {m} differs from the build's in {differ} rows")
            return seconds
    finally:
        engine.close()


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


def time_demo(work: Path, url: str | None, orders_per_day: int | None) -> float:
    """Seconds of ``backfill demo`` (``--engine postgres --url url`` when given; the demo's own
    size unless ``orders_per_day``) in a new process, as a user runs it, in a new directory
    under ``work``."""
    cli = Path(sys.executable).with_name("backfill")
    target = work / f"demo_{uuid.uuid4().hex[:8]}"
    argv = [str(cli), "demo", "--dir", str(target)]
    if url is not None:
        argv += ["--engine", "postgres", "--url", url]
    if orders_per_day is not None:
        argv += ["--orders-per-day", str(orders_per_day)]
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({done.returncode}):\n{done.stderr}")
    shutil.rmtree(target, ignore_errors=True)
    return took


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _state(_dir: str, names: list[str]) -> set[str]:
    """shutil.copytree's ignore: a project's ledger and run state stay behind."""
    return {".backfill"} & set(names)


def new_database(url: str) -> str:
    """An empty database beside ``url``'s, for a demo."""
    name = f"demo_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
    ap.add_argument(
        "--orders-per-day", type=int, default=None, help="the shop's size (default 240; quick 12)"
    )
    ap.add_argument("--demo", action="store_true", help="also time `backfill demo` on both engines")
    ap.add_argument("--json", action="store_true", help="a JSON line with the results last")
    args = ap.parse_args()
    per_day = args.orders_per_day or (12 if args.quick else 240)
    if per_day < 1:
        raise SystemExit(f"--orders-per-day must be at least 1, got {per_day}")
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
        built_pg = shop_pg.create(work / "pg", base_url, orders_per_day=per_day)
        template = base_url.rsplit("/", 1)[1]
        # the raw data before any build, for the builds after the first
        raw_duck = shutil.copytree(built_duck, work / "duck_raw")
        raw_template = clone_database(base_url, template).rsplit("/", 1)[1]
        times["duckdb"]["build"].append(build(built_duck, args.concurrency))
        times["postgres"]["build"].append(build(built_pg, args.concurrency))
        for i in range(repeat):  # on copies of the built shops (the tables stay)
            duck = shutil.copytree(built_duck, work / f"duck_plain{i}")
            times["duckdb"]["plain"].append(plain_build(duck))
            shutil.rmtree(duck, ignore_errors=True)
            url = clone_database(base_url, template)
            pg = shutil.copytree(built_pg, work / f"pg_plain{i}", ignore=_state)
            yml = pg / "backfill.yml"
            yml.write_text(yml.read_text().replace(base_url, url))
            times["postgres"]["plain"].append(plain_build(pg))
            shutil.rmtree(pg, ignore_errors=True)
            drop_database(url)
        for i in range(1, repeat):
            duck = shutil.copytree(raw_duck, work / f"duck_build{i}")
            times["duckdb"]["build"].append(build(duck, args.concurrency))
            shutil.rmtree(duck, ignore_errors=True)
            url = clone_database(base_url, raw_template)
            pg = shutil.copytree(built_pg, work / f"pg_build{i}", ignore=_state)
            yml = pg / "backfill.yml"
            yml.write_text(yml.read_text().replace(base_url, url))
            times["postgres"]["build"].append(build(pg, args.concurrency))
            shutil.rmtree(pg, ignore_errors=True)
            drop_database(url)
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
            f"at concurrency {args.concurrency}; median of {repeat}"
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
        build_ok = ratio["build"] <= BUILD_TARGET
        print(
            f"initial build at {per_day} orders a day: postgres {med['postgres']['build']:.2f}s / "
            f"duckdb {med['duckdb']['build']:.2f}s = {ratio['build']:.2f}x "
            f"(target <= {BUILD_TARGET:g}x): {met(build_ok)}"
        )
        print(
            f"  the warehouses' floor (plain CREATE TABLE AS a model, parents first): postgres "
            f"{med['postgres']['plain']:.2f}s / duckdb {med['duckdb']['plain']:.2f}s = "
            f"{ratio['plain']:.2f}x; the build over it: postgres "
            f"{med['postgres']['build'] / med['postgres']['plain']:.2f}x, duckdb "
            f"{med['duckdb']['build'] / med['duckdb']['plain']:.2f}x"
        )
        demo: dict[str, float] = {}
        if args.demo:
            runs: dict[str, list[float]] = {"duckdb": [], "postgres": []}
            demo_size = per_day if args.quick else None  # the demo as users run it
            for _ in range(repeat):
                runs["duckdb"].append(time_demo(work, None, demo_size))
                url = new_database(base_url)
                runs["postgres"].append(time_demo(work, url, demo_size))
                drop_database(url)
            demo = {e: statistics.median(v) for e, v in runs.items()}
            demo_ratio = demo["postgres"] / demo["duckdb"]
            print(
                f"backfill demo (new process, median of {repeat}): postgres "
                f"{demo['postgres']:.2f}s / duckdb {demo['duckdb']:.2f}s = {demo_ratio:.2f}x "
                f"(target <= {DEMO_TARGET:g}x): {met(demo_ratio <= DEMO_TARGET)}"
            )
        if args.json:
            print(
                json.dumps(
                    {
                        "identical": same,
                        "median": med,
                        "ratio": ratio,
                        "ratio_total": total["postgres"] / total["duckdb"],
                        "orders_per_day": per_day,
                        "build_met": build_ok,
                        "demo": demo,
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
