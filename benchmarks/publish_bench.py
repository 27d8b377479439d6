"""Publish at scale (issue 18, target 5): swapping the 90 backfilled partitions of the shared
fact table (:mod:`scale_fact`: 100M raw rows, built, the fix in place) into the published
``fct_order_lines`` against DuckDB doing the same DELETE + INSERT of those rows in ONE
transaction; with a reader querying the published table all the while.

Each repeat (interleaved, ``--repeat`` times, medians):

* ``delete+insert``: ``BEGIN; DELETE`` the 90 days ``; INSERT`` the rows of the 90 days as first
  built (a copy kept aside) ``; COMMIT`` -- the floor, and it puts the published table back as
  built, so every publish swaps the same 9 changed days;
* the backfill (90 days, ten a task) and its audit, untimed;
* ``publish``: ``Backfill.publish`` (all of it: checks, the swap, changelog, ledger, dropping
  the area) with ``publish: {keep: 0}``, as publish was before it kept what it replaces;
  ``swap`` is the engine's publish transaction within it;
* ``publish+backup``: the same publish of a second backfill of the same days (after a
  delete+insert put the built rows back), keeping what it replaces (``keep: 30d``, the
  default: the 90 days' old rows copied into ``backup_<id>`` in the same transaction);
* ``rollback``: ``Project.rollback`` of that publication (its checks, the restore, and what the
  rollback keeps in turn), after which the published window must equal the built one again.

A reader thread (its own cursor on the same database, as a dashboard in the process would)
sums the published window in a loop during both (paused during the untimed steps); its longest
query is reported against its median when idle and against the swap, and every answer must be
all-old or all-new (snapshot isolation). After each publish the published window must equal a
CTAS of the fixed model over the window (row for row with --quick, and with --exact after the
last repeat; else per-day rows and sums of row hashes), and the rows outside it must be
unchanged.

Another process cannot open a DuckDB file that a process holds for writing at all (DuckDB's
file lock): such readers wait while the publishing process holds the file, which this
benchmark does not measure.

    python benchmarks/publish_bench.py --dir /tmp/fact --rows 100000000
    python benchmarks/publish_bench.py --quick                              # 1M rows, 1 repeat

Targets: publish <= 1.5x delete+insert; the reader's longest wait <= the swap; publish+backup
<= 1.2x publish; rollback <= publish+backup (exit 1 when missed, unless --quick).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backfill
import run_bench
import scale_fact
from backfill.engines.duckdb.engine import DuckDBEngine

TARGET = 1.5
BACKUP_TARGET = 1.2  # publish keeping what it replaces vs publish keeping nothing
PUB = f'main."{scale_fact.MODEL}"'
WINDOW = (
    f"ordered_at >= TIMESTAMP '{scale_fact.WINDOW_START}' AND "
    f"ordered_at < TIMESTAMP '{scale_fact.WINDOW_END}'"
)


class Reader(threading.Thread):
    """Sums the published window in a loop; records each query's latency and answer."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True, name="publish-bench-reader")
        self.con = duckdb.connect(str(path))  # the process's instance: its own cursor
        self.stop = threading.Event()
        self.active = threading.Event()  # reads only while a competitor runs (and when idle)
        self.active.set()
        self.samples: list[tuple[float, float, Any]] = []  # (began, seconds, answer)

    def run(self) -> None:
        cur = self.con.cursor()
        while not self.stop.is_set():
            if not self.active.wait(0.1):
                continue
            began = time.perf_counter()
            row = cur.execute(
                f"SELECT count(*), sum(net_amount) FROM {PUB} WHERE {WINDOW}"
            ).fetchone()
            self.samples.append((began, time.perf_counter() - began, row))
            time.sleep(0.005)
        cur.close()

    def between(self, t0: float, t1: float) -> list[tuple[float, float, Any]]:
        """Queries that overlapped [t0, t1]."""
        return [s for s in self.samples if s[0] <= t1 and s[0] + s[1] >= t0]


def set_keep(root: Path, keep: str | int) -> None:
    """``publish: {keep: ...}`` in the fact project's backfill.yml."""
    yml = root / "backfill.yml"
    text = "\n".join(
        line for line in yml.read_text().splitlines() if not line.startswith("publish:")
    )
    yml.write_text(f"{text}\npublish: {{keep: {keep}}}\n")


def audited(root: Path) -> Any:
    """A new backfill of the fact model's 90 days, run and audited (untimed)."""
    proj = backfill.Project.load(root)
    plan = proj.plan(
        scale_fact.MODEL,
        scale_fact.WINDOW_START,
        scale_fact.WINDOW_END,
        as_of=scale_fact.WINDOW_END,
        partitions_per_run=10,
        concurrency=2,
    )
    bf = proj.backfill(plan, reason="publish_bench: promotions applied")
    assert bf.run(concurrency=2).ok
    bf.audit()
    return bf


def main() -> int:
    args = run_bench.fact_args(__doc__).parse_args()
    rows, repeat = run_bench.sizes(args)
    with contextlib.ExitStack() as stack:
        directory = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        return bench(run_bench.prepare(directory, rows), rows, repeat, args)


def bench(root: Path, rows: int, repeat: int, args: argparse.Namespace) -> int:
    project = backfill.Project.load(root)
    fixed_sql = run_bench.window_sql(project, scale_fact.WINDOW_START, scale_fact.WINDOW_END)
    keeper = duckdb.connect(str(root / "warehouse.duckdb"))
    keeper.execute(f"SET memory_limit = '{run_bench.MEMORY_LIMIT}'")
    keeper.execute("SET threads = 2")
    keeper.execute("SET TimeZone = 'UTC'")
    swaps: list[float] = []
    original_publish = DuckDBEngine.publish

    def timed_publish(self: DuckDBEngine, *a: Any, **kw: Any) -> Any:
        began = time.perf_counter()
        try:
            return original_publish(self, *a, **kw)
        finally:
            swaps.append(time.perf_counter() - began)

    times: dict[str, list[float]] = {
        "delete+insert": [],
        "publish": [],
        "publish+backup": [],
        "rollback": [],
    }
    waits: dict[str, list[float]] = {"delete+insert": [], "publish": []}
    mixed = 0
    differing: list[int] = []
    outside_changed = False
    reader = Reader(root / "warehouse.duckdb")
    DuckDBEngine.publish = timed_publish  # type: ignore[method-assign]
    try:
        keeper.execute(
            "CREATE OR REPLACE TABLE main.publish_bench_built AS "
            f"SELECT * FROM {PUB} WHERE {WINDOW}"
        )
        keeper.execute(f"CREATE OR REPLACE TABLE main.publish_bench_oracle AS {fixed_sql}")
        outside = f"SELECT count(*), sum(net_amount) FROM {PUB} WHERE NOT ({WINDOW})"
        outside_before = keeper.execute(outside).fetchone()
        answers = {
            keeper.execute(f"SELECT count(*), sum(net_amount) FROM {t}").fetchone()
            for t in ("main.publish_bench_built", "main.publish_bench_oracle")
        }
        reader.start()
        while len(reader.samples) < 3:  # idle samples first
            time.sleep(0.05)
        idle = [s[1] for s in reader.samples]
        reader.active.clear()  # not during the untimed steps (the backfill, its audit)
        for i in range(repeat):
            reader.active.set()
            time.sleep(0.2)  # the reader is reading when the competitor starts
            t0 = time.perf_counter()
            keeper.execute("BEGIN TRANSACTION")
            keeper.execute(f"DELETE FROM {PUB} WHERE {WINDOW}")
            keeper.execute(f"INSERT INTO {PUB} SELECT * FROM main.publish_bench_built")
            keeper.execute("COMMIT")
            t1 = time.perf_counter()
            times["delete+insert"].append(t1 - t0)
            waits["delete+insert"].append(max(s[1] for s in reader.between(t0, t1)))
            reader.active.clear()
            set_keep(root, 0)
            bf = audited(root)
            reader.active.set()
            time.sleep(0.2)
            t0 = time.perf_counter()
            bf.publish(note="publish_bench: net amounts of promotion days corrected")
            t1 = time.perf_counter()
            times["publish"].append(t1 - t0)
            waits["publish"].append(max(s[1] for s in reader.between(t0, t1)))
            reader.active.clear()
            # The same publish keeping what it replaces, and its rollback (untimed: the built
            # rows back, a second backfill and its audit).
            keeper.execute("BEGIN TRANSACTION")
            keeper.execute(f"DELETE FROM {PUB} WHERE {WINDOW}")
            keeper.execute(f"INSERT INTO {PUB} SELECT * FROM main.publish_bench_built")
            keeper.execute("COMMIT")
            set_keep(root, "30d")
            bf = audited(root)
            t0 = time.perf_counter()
            pub = bf.publish(note="publish_bench: the same, kept for a rollback")
            times["publish+backup"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            backfill.Project.load(root).rollback(pub.id, note="publish_bench: taken back")
            times["rollback"].append(time.perf_counter() - t0)
            rolled_back = (
                keeper.execute(
                    f"SELECT count(*), sum(net_amount) FROM {PUB} WHERE {WINDOW}"
                ).fetchone()
                == keeper.execute(
                    "SELECT count(*), sum(net_amount) FROM main.publish_bench_built"
                ).fetchone()
            )
            outside_changed |= not rolled_back
            keeper.execute("BEGIN TRANSACTION")  # the fixed rows again, for the checks below
            keeper.execute(f"DELETE FROM {PUB} WHERE {WINDOW}")
            keeper.execute(f"INSERT INTO {PUB} SELECT * FROM main.publish_bench_oracle")
            keeper.execute("COMMIT")
            if args.quick or (args.exact and i == repeat - 1):  # row for row: minutes at 100M
                differing.append(run_bench.window_differs(keeper, PUB, "main.publish_bench_oracle"))
            else:
                window = f"(SELECT * FROM {PUB} WHERE {WINDOW})"
                differing.append(
                    len(
                        set(run_bench.day_fingerprints(keeper, window))
                        ^ set(run_bench.day_fingerprints(keeper, "main.publish_bench_oracle"))
                    )
                )
            outside_changed |= keeper.execute(outside).fetchone() != outside_before
            print(
                f"  [{i + 1}/{repeat}] delete+insert {times['delete+insert'][-1]:.2f} s, "
                f"publish {times['publish'][-1]:.2f} s (swap {swaps[-3]:.2f} s), "
                f"publish+backup {times['publish+backup'][-1]:.2f} s, rollback "
                f"{times['rollback'][-1]:.2f} s, reader longest {waits['publish'][-1]:.3f} s, "
                f"differing {differing[-1]}",
                flush=True,
            )
        reader.stop.set()
        reader.join()
        mixed = sum(1 for s in reader.samples if s[2] not in answers)
    finally:
        DuckDBEngine.publish = original_publish  # type: ignore[method-assign]
        reader.stop.set()
        keeper.execute("DROP TABLE IF EXISTS main.publish_bench_built")
        keeper.execute("DROP TABLE IF EXISTS main.publish_bench_oracle")
        keeper.close()
        reader.con.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    swap = statistics.median(swaps[0::3])  # each repeat: publish, publish+backup, rollback
    ratio = med["publish"] / med["delete+insert"]
    longest = max(waits["publish"])
    identical = not any(differing) and not outside_changed
    print(
        f"publish_bench: {rows:,} raw rows, 90 days published ({scale_fact.WINDOW_START}.."
        f"{scale_fact.WINDOW_END}), {repeat} repeat(s), load {os.getloadavg()[0]:.2f}"
    )
    backup_ratio = med["publish+backup"] / med["publish"]
    rollback_ratio = med["rollback"] / med["publish+backup"]
    for k, v in times.items():
        extra = {
            "publish": f"  {ratio:.2f}x delete+insert",
            "publish+backup": f"  {backup_ratio:.2f}x publish",
            "rollback": f"  {rollback_ratio:.2f}x publish+backup",
        }.get(k, "")
        print(f"  {k:>14}: median {med[k]:7.3f} s{extra}   ({', '.join(f'{x:.2f}' for x in v)})")
    print(
        f"  {'swap':>14}: median {swap:7.3f} s (the engine's publish transaction, within publish)"
    )
    print(
        f"  reader: {len(reader.samples)} queries, idle median {statistics.median(idle):.3f} s;"
        f" longest during delete+insert {max(waits['delete+insert']):.3f} s, during publish "
        f"{longest:.3f} s; answers neither all-old nor all-new: {mixed}"
    )
    print(
        f"  published window equals the fixed model's CTAS, rows outside unchanged: "
        f"{identical} {differing}"
    )
    met = ratio <= TARGET
    met_wait = longest <= max(swaps[0::3])
    met_backup = backup_ratio <= BACKUP_TARGET
    met_rollback = rollback_ratio <= 1.0
    note = " (quick run: indicative only)" if args.quick else ""
    print(
        f"target publish <= {TARGET}x delete+insert: {'met' if met else 'not met'} "
        f"({ratio:.2f}x){note}"
    )
    print(
        f"target reader's longest wait <= the swap: {'met' if met_wait else 'not met'} "
        f"({longest:.3f} s vs swap {max(swaps[0::3]):.3f} s){note}"
    )
    print(
        f"target publish+backup <= {BACKUP_TARGET}x publish: "
        f"{'met' if met_backup else 'not met'} ({backup_ratio:.2f}x){note}"
    )
    print(
        f"target rollback <= publish+backup: {'met' if met_rollback else 'not met'} "
        f"({rollback_ratio:.2f}x){note}"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "median_seconds": {**med, "swap": swap},
                    "ratio": ratio,
                    "backup_ratio": backup_ratio,
                    "rollback_ratio": rollback_ratio,
                    "reader_longest": longest,
                    "identical": identical,
                    "mixed_answers": mixed,
                    "load": os.getloadavg(),
                }
            )
        )
    if not identical or mixed:
        return 1
    return 0 if (met and met_wait and met_backup and met_rollback) or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
