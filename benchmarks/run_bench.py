"""Run overhead at scale (issue 18, target 4): the 90-day backfill of ``fct_order_lines`` on the
shared fact table (:mod:`scale_fact`: 100M raw rows over 365 days, built, the fix in place)
against ONE monolithic ``CREATE TABLE AS`` of the same SQL over the same 90 days.

Competitors, interleaved, ``--repeat`` times each (medians), all at DuckDB's 2 threads:

* ``ctas``: ``CREATE TABLE ... AS <the model's SELECT for the 90 days>`` in one statement (the
  floor: no tasks, no ledger, no fingerprints); its table is the oracle;
* ``one day``: the backfill, partition-scoped, ``partitions_per_run=1`` (90 tasks);
* ``ten days``: the same with ``partitions_per_run=10`` (9 tasks).

Both backfills run at ``--concurrency`` (2) into their audit area; each area must equal the
CTAS table, then is discarded: row for row (``EXCEPT ALL`` both ways) with ``--quick`` (the test)
and with ``--exact`` in the last repeat; else per-day (rows, sum of row hashes) computed here,
independently of the engine's fingerprints (the exact check takes ~5 min a run at 100M rows).

Per-task overhead (everything that is not the model's own query: ledger round trips, lease,
transaction, checks, fingerprint), measured two ways:

* ``empty period``: the same model, one task a day, over 90 days of 2026 where the raw table
  has no rows (concurrency 1): wall time per task, the model's own (empty) query included;
* ``breakdown``: a one-day-per-task run at concurrency 1 over the real window with every
  engine statement and ledger call timed: per task, the time outside the model's own query
  (the statement that writes the partition's rows) split by what it was spent on.

    python benchmarks/run_bench.py --dir /tmp/fact --rows 100000000   # full (reuses --dir)
    python benchmarks/run_bench.py --quick             # 1M rows, 1 repeat, no empty period

Targets: ten days <= 1.3x ctas; per-task overhead <= 10 ms (exit 1 when missed, unless --quick).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backfill
import scale_fact
from backfill.engines import PUBLISHED
from backfill.engines.registry import engine_for

RATIO_TARGET, OVERHEAD_TARGET_MS = 1.3, 10.0
EMPTY_START, EMPTY_END = "2026-01-01", "2026-04-01"  # 90 days after the raw data ends
MEMORY_LIMIT = "6GB"  # two helpers' 100M runs share the machine's 24 GiB
_BUILT = ".run_bench_built"


def prepare(directory: Path, rows: int) -> Path:
    """The fact project, built (365 days published) and fixed; reused when already there."""
    marker = directory / _BUILT
    if marker.exists() and json.loads(marker.read_text())["rows"] == rows:
        return scale_fact.fix(directory)
    scale_fact.create(directory, rows=rows)
    scale_fact.build(directory)
    scale_fact.fix(directory)
    marker.write_text(json.dumps({"rows": rows}))
    return directory


def window_sql(project: backfill.Project, start: str, end: str) -> str:
    engine = engine_for(project)
    try:
        return engine.render(
            project,
            scale_fact.MODEL,
            dt.datetime.fromisoformat(start),
            dt.datetime.fromisoformat(end),
            PUBLISHED,
        )
    finally:
        engine.close()


def run_ctas(con: duckdb.DuckDBPyConnection, sql: str) -> float:
    con.execute("DROP TABLE IF EXISTS main.run_bench_ctas")
    began = time.perf_counter()
    con.execute(f"CREATE TABLE main.run_bench_ctas AS {sql}")
    return time.perf_counter() - began


def run_backfill(
    root: Path, ppr: int, concurrency: int, start: str, end: str, keep: bool = False
) -> tuple[float, int, str]:
    """Seconds of ``Backfill.run``, the task count and the backfill id."""
    project = backfill.Project.load(root)
    plan = project.plan(
        scale_fact.MODEL, start, end, as_of=end, partitions_per_run=ppr, concurrency=concurrency
    )
    bf = project.backfill(plan, reason="run_bench: promotions applied")
    began = time.perf_counter()
    status = bf.run(concurrency=concurrency)
    seconds = time.perf_counter() - began
    assert status.ok, str(status)
    return seconds, plan.task_count, bf.id


def window_differs(con: duckdb.DuckDBPyConnection, left: str, right: str) -> int:
    """Rows of ``left`` in the window not in ``right``, and the other way round (EXCEPT ALL ten
    days at a time: one pass over 90 days spills at 100M rows, ten days fit in memory)."""
    first = dt.date.fromisoformat(scale_fact.WINDOW_START)
    total = 0
    for k in range(0, 90, 10):
        s, e = first + dt.timedelta(days=k), first + dt.timedelta(days=min(k + 10, 90))
        where = f"ordered_at >= TIMESTAMP '{s}' AND ordered_at < TIMESTAMP '{e}'"
        a, b = (f"(SELECT * FROM {rel} WHERE {where})" for rel in (left, right))
        row = con.execute(
            f"SELECT (SELECT count(*) FROM (FROM {a} EXCEPT ALL FROM {b})) + "
            f"(SELECT count(*) FROM (FROM {b} EXCEPT ALL FROM {a}))"
        ).fetchone()
        assert row is not None
        total += int(row[0])
    return total


def day_fingerprints(con: duckdb.DuckDBPyConnection, relation: str) -> list[Any]:
    """Per day of ``relation``: rows and the sum of row hashes (one hash aggregate)."""
    names = [d[0] for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description]
    h = "hash(" + ", ".join(f'"{n}"' for n in sorted(names)) + ")::HUGEINT"
    return con.execute(
        f"SELECT CAST(ordered_at AS DATE) d, count(*), sum({h}) FROM {relation} "
        "GROUP BY d ORDER BY d"
    ).fetchall()


def area_differs(con: duckdb.DuckDBPyConnection, backfill_id: str, exact: bool) -> int:
    """Rows of the backfill's audit area not in the CTAS oracle, and the other way round:
    exactly (EXCEPT ALL) when ``exact``, else days whose fingerprints differ (at 100M rows the
    exact comparison takes minutes a run: --quick always, a full run with --exact)."""
    area = f'"audit_{backfill_id}"."{scale_fact.MODEL}"'
    if not exact:
        a, b = (day_fingerprints(con, r) for r in (area, "main.run_bench_ctas"))
        return len(set(a) ^ set(b))
    row = con.execute(
        f"SELECT (SELECT count(*) FROM {area}), (SELECT count(*) FROM main.run_bench_ctas)"
    ).fetchone()
    assert row is not None
    in_window = window_differs(con, area, "main.run_bench_ctas")
    # every row of both is in the window: equal totals then mean nothing outside either
    return in_window + abs(int(row[0]) - int(row[1]))


def discard(root: Path, backfill_id: str) -> None:
    project = backfill.Project.load(root)
    backfill.Backfill.open(backfill_id, project=project).discard()


# -- the breakdown: every engine statement and ledger call of a run, timed ---------------------
class _Timings:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)

    def add(self, what: str, seconds: float, cpu: float = 0.0) -> None:
        with self.lock:
            self.seconds[what] += seconds
            self.cpu[what] += cpu
            self.calls[what] += 1


_MODEL_QUERY = "model query (writes the rows)"
_CATALOG = "catalog (relation exists, schema, columns)"


def _kind(sql: str) -> str:
    s = " ".join(sql.split()).upper()
    if s.startswith(("BEGIN", "COMMIT", "ROLLBACK")):
        return "transaction (begin/commit)"
    if (
        "DUCKDB_TABLES()" in s
        or "DUCKDB_COLUMNS()" in s
        or s.endswith("LIMIT 0")
        or s.startswith(("CREATE SCHEMA", "DESCRIBE"))
    ):
        return _CATALOG
    if '"RAW"."ORDER_LINES"' in s:  # the rendered model reads the raw table
        return _MODEL_QUERY
    if "HASH(" in s:
        return "fingerprint"
    if s.startswith("INSERT INTO"):
        return "copy temp table into the area"
    if s.startswith("SELECT COUNT(*)"):
        return "checks and counts"
    if s.startswith(("DELETE", "DROP")):
        return "delete old rows, drop temp"
    if s.startswith("SET "):
        return "session settings"
    return "other"


class _TimedCursor:
    """A DuckDB cursor whose ``execute`` is timed by kind of statement."""

    def __init__(self, cur: duckdb.DuckDBPyConnection, timings: _Timings) -> None:
        self._cur, self._t = cur, timings

    def execute(self, sql: str, *args: Any) -> _TimedCursor:
        began, cpu = time.perf_counter(), time.process_time()
        self._cur.execute(sql, *args)
        self._t.add(_kind(sql), time.perf_counter() - began, time.process_time() - cpu)
        return self

    def sql(self, query: str, *args: Any) -> Any:
        """A relation bound (not run) to read its columns: catalog work, even when it binds the
        model's SELECT (the statement that writes the rows is the model query)."""
        began, cpu = time.perf_counter(), time.process_time()
        try:
            return self._cur.sql(query, *args)
        finally:
            self._t.add(_CATALOG, time.perf_counter() - began, time.process_time() - cpu)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def breakdown(root: Path, start: str, end: str) -> dict[str, Any]:
    """One task a day at concurrency 1, every statement and ledger call timed."""
    from backfill.engines.duckdb.engine import DuckDBEngine
    from backfill.run import executor
    from backfill.run.ledger.sqlite import Ledger

    timings = _Timings()
    original_connect = DuckDBEngine.connect

    @contextlib.contextmanager
    def connect(self: DuckDBEngine) -> Iterator[Any]:
        with original_connect(self) as cur:
            yield _TimedCursor(cur, timings)

    def timed(cls: Any, name: str, label: str) -> Any:
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began, cpu = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                timings.add(label, time.perf_counter() - began, time.process_time() - cpu)

        setattr(cls, name, wrapper)
        return original

    patched = [(DuckDBEngine, "connect", original_connect)]
    DuckDBEngine.connect = connect  # type: ignore[method-assign]
    for name, label in (
        ("claim", "ledger: claim"),
        ("finish", "ledger: finish"),
        ("backfill", "ledger: read backfill"),
        ("tasks", "ledger: read tasks"),
        ("renew", "ledger: renew lease"),
    ):
        patched.append((Ledger, name, timed(Ledger, name, label)))
    patched.append(
        (
            executor.TaskExecutor,
            "execute",
            timed(executor.TaskExecutor, "execute", "task (whole)"),
        )
    )
    patched.append(
        (executor._Lease, "__enter__", timed(executor._Lease, "__enter__", "lease thread start"))
    )
    patched.append(
        (executor._Lease, "__exit__", timed(executor._Lease, "__exit__", "lease thread stop"))
    )
    try:
        seconds, tasks, bf_id = run_backfill(root, 1, 1, start, end)
    finally:
        for cls, name, original in patched:
            setattr(cls, name, original)
    discard(root, bf_id)
    per_task = {k: 1000 * v / tasks for k, v in timings.seconds.items()}
    cpu_task = {k: 1000 * v / tasks for k, v in timings.cpu.items()}
    whole = per_task.pop("task (whole)")
    query = per_task.get(_MODEL_QUERY, 0.0)
    outside_task = 1000 * seconds / tasks - whole
    return {
        "tasks": tasks,
        "run_seconds": seconds,
        "task_ms": whole,
        "model_query_ms": query,
        "overhead_ms": 1000 * seconds / tasks - query,
        "in_task_overhead_ms": whole - query,
        "runner_loop_ms": outside_task,
        "parts_ms": dict(sorted(per_task.items(), key=lambda kv: -kv[1])),
        "cpu_ms": cpu_task,
    }


def fact_args(doc: str) -> argparse.ArgumentParser:
    """The options run_bench and publish_bench share (the fact table, repeats, checks)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="the fact project (created and built if missing)")
    ap.add_argument("--rows", type=int, default=None, help="raw rows (default 100M; quick 1M)")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="1M rows, 1 repeat")
    ap.add_argument(
        "--exact",
        action="store_true",
        help="full size: also compare row for row in the last repeat (minutes)",
    )
    ap.add_argument("--json", action="store_true", help="also print the results as JSON")
    return ap


def sizes(args: argparse.Namespace) -> tuple[int, int]:
    """(raw rows, repeats) from fact_args' options."""
    return (
        args.rows or (1_000_000 if args.quick else 100_000_000),
        args.repeat or (1 if args.quick else 3),
    )


def main() -> int:
    ap = fact_args(__doc__)
    ap.add_argument("--concurrency", type=int, default=2)
    args = ap.parse_args()
    rows, repeat = sizes(args)
    with contextlib.ExitStack() as stack:
        directory = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        return bench(prepare(directory, rows), rows, repeat, args)


def bench(root: Path, rows: int, repeat: int, args: argparse.Namespace) -> int:
    project = backfill.Project.load(root)
    sql = window_sql(project, scale_fact.WINDOW_START, scale_fact.WINDOW_END)
    # One connection held open for the whole benchmark: the engine's connections to the file
    # share its database instance, so the memory cap and thread count hold for every path.
    keeper = duckdb.connect(str(root / "warehouse.duckdb"))
    keeper.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    keeper.execute("SET threads = 2")
    keeper.execute("SET TimeZone = 'UTC'")
    ways = {"one day": 1, "ten days": 10}
    times: dict[str, list[float]] = {"ctas": [], **{w: [] for w in ways}}
    tasks: dict[str, int] = {"ctas": 1}
    differing: dict[str, int] = {}
    try:
        for i in range(repeat):  # interleaved: load drifts hit all alike
            times["ctas"].append(run_ctas(keeper, sql))
            for way, ppr in ways.items():
                seconds, n, bf_id = run_backfill(
                    root, ppr, args.concurrency, scale_fact.WINDOW_START, scale_fact.WINDOW_END
                )
                times[way].append(seconds)
                tasks[way] = n
                exact = args.quick or (args.exact and i == repeat - 1)
                differing[way] = max(differing.get(way, 0), area_differs(keeper, bf_id, exact))
                print(
                    f"  [{i + 1}/{repeat}] ctas {times['ctas'][-1]:.2f} s, {way} {seconds:.2f} s"
                    f", differing {differing[way]}",
                    flush=True,
                )
                discard(root, bf_id)
        empty_ms = None
        if not args.quick:  # the breakdown measures the overhead too
            empty_s, empty_tasks, empty_id = run_backfill(root, 1, 1, EMPTY_START, EMPTY_END)
            discard(root, empty_id)
            empty_ms = 1000 * empty_s / empty_tasks
        parts = breakdown(root, scale_fact.WINDOW_START, scale_fact.WINDOW_END)
        oracle_rows = int(keeper.execute("SELECT count(*) FROM main.run_bench_ctas").fetchone()[0])  # type: ignore[index]
        keeper.execute("DROP TABLE IF EXISTS main.run_bench_ctas")
    finally:
        keeper.close()
    med = {w: statistics.median(t) for w, t in times.items()}
    ratios = {w: med[w] / med["ctas"] for w in ways}
    overhead = max(empty_ms or 0.0, parts["overhead_ms"])
    print(
        f"run_bench: {rows:,} raw rows, {scale_fact.WINDOW_START}..{scale_fact.WINDOW_END} "
        f"(90 days, {oracle_rows:,} model rows), concurrency {args.concurrency}, "
        f"{repeat} repeat(s), load {os.getloadavg()[0]:.2f}"
    )
    for way, t in times.items():
        ratio = "" if way == "ctas" else f"  {ratios[way]:.2f}x ctas"
        print(
            f"  {way:>9}: {tasks[way]:>3} task(s), median {med[way]:7.3f} s{ratio}   "
            f"({', '.join(f'{x:.2f}' for x in t)})"
        )
    identical = all(v == 0 for v in differing.values())
    print(
        f"  audit areas equal the CTAS oracle: {identical} {differing} ("
        f"{'row for row' if args.quick or args.exact else 'per-day fingerprints'})"
    )
    if empty_ms is not None:
        print(
            f"per-task overhead, empty period (90 tasks, concurrency 1, model query on no "
            f"rows included): {empty_ms:.2f} ms/task"
        )
    print(
        f"per-task overhead, breakdown (one day a task, concurrency 1, {parts['tasks']} tasks, "
        f"{parts['run_seconds']:.2f} s): {parts['overhead_ms']:.2f} ms/task = run time per "
        f"task {1000 * parts['run_seconds'] / parts['tasks']:.2f} - model query "
        f"{parts['model_query_ms']:.2f}"
    )
    print(
        f"    runner loop between tasks: {parts['runner_loop_ms']:.2f} ms; inside the task: "
        f"{parts['in_task_overhead_ms']:.2f} ms, of which:"
    )
    for what, ms in parts["parts_ms"].items():
        if what != _MODEL_QUERY:
            print(f"    {what:>42}: {ms:6.2f} ms  (cpu {parts['cpu_ms'][what]:6.2f} ms)")
    met_ratio = ratios["ten days"] <= RATIO_TARGET
    met_overhead = overhead <= OVERHEAD_TARGET_MS
    note = " (quick run: indicative only)" if args.quick else ""
    print(
        f"target ten days <= {RATIO_TARGET}x ctas: {'met' if met_ratio else 'not met'} "
        f"({ratios['ten days']:.2f}x){note}"
    )
    print(
        f"target per-task overhead <= {OVERHEAD_TARGET_MS:g} ms: "
        f"{'met' if met_overhead else 'not met'} ({overhead:.2f} ms, the larger of the two)"
        f"{note}"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "median_seconds": med,
                    "ratios": ratios,
                    "tasks": tasks,
                    "identical": identical,
                    "empty_ms_per_task": empty_ms,
                    "breakdown": parts,
                    "load": os.getloadavg(),
                }
            )
        )
    if not identical:
        return 1
    return 0 if (met_ratio and met_overhead) or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
