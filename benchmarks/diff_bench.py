"""backfill.diff against DuckDB SQL, datacompy (polars), a polars join diff and a memory floor.

    python benchmarks/diff_bench.py            # 10 M rows x 10 columns (the issue's targets)
    python benchmarks/diff_bench.py --quick    # 100 k rows, one run each (the test suite)

The table: int64 key, 4 float64, 2 int64, 2 strings, 1 date; 1% of rows changed (one column
each, round robin), 0.1% added, 0.1% removed. Every tool produces per-column change counts plus
added/removed counts; the benchmark checks they all agree, then prints medians and ratios, the
tools interleaved (one run of each per round) on this shared machine. Workloads, each with
its targets (met / not met):
- key-ordered rows (backfill's merge path): >= 3x DuckDB, >= 20x datacompy, faster than a
  polars join diff, within 4x of a one-pass memory floor;
- the same rows shuffled on both sides (the hash path; the common case for tables read from
  a warehouse): >= 6x DuckDB's FULL OUTER JOIN diff, >= 20x datacompy;
- a composite key (id, d) over the key-ordered rows (the merge path, which takes keys of
  several integer/date columns sorted lexicographically): >= 4x DuckDB; and the same over the
  shuffled rows (the hash path), reported against the same target;
- a tolerance on f1 (no target: backfill and DuckDB only).
Peak RSS of a diff in a fresh process over memory-mapped inputs stays <= 1.3x the inputs, on
both paths.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import backfill

VALUE_COLUMNS = ["f1", "f2", "f3", "f4", "i1", "i2", "s1", "s2", "d"]
Counts = dict[str, int]


def make_tables(n: int, seed: int = 42) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    cols: dict[str, Any] = {"id": ids}
    for c in ("f1", "f2", "f3", "f4"):
        cols[c] = rng.normal(100.0, 30.0, n)
    cols["i1"] = rng.integers(0, 1_000_000, n)
    cols["i2"] = rng.integers(-5_000, 5_000, n)
    for c, mod in (("s1", 100_000), ("s2", 1_000)):
        num = pa.array(rng.integers(0, mod, n)).cast(pa.string())
        cols[c] = pc.binary_join_element_wise(f"{c}-customer-", num, "")
    cols["d"] = pa.array(rng.integers(20_000, 20_400, n).astype(np.int32)).cast(pa.date32())
    old = pa.table(cols)

    # 1% changed rows, one column each (round robin); 0.1% removed; 0.1% added.
    changed = rng.choice(n, size=n // 100, replace=False)
    new_cols = {c: old[c].combine_chunks() for c in old.column_names}
    for j, c in enumerate(VALUE_COLUMNS):
        rows = np.sort(changed[j :: len(VALUE_COLUMNS)])
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        m = pa.array(mask)
        col = new_cols[c]
        if c.startswith("f"):
            repl = pc.add(col, 1.0)
        elif c.startswith("i"):
            repl = pc.add(col, 1)
        elif c.startswith("s"):
            repl = pc.binary_join_element_wise(col, "-v2", "")
        else:
            repl = pa.array(col.cast(pa.int32()).to_numpy() + 1).cast(pa.date32())
        new_cols[c] = pc.if_else(m, repl, col)
    keep = np.ones(n, dtype=bool)
    keep[rng.choice(n, size=n // 1000, replace=False)] = False
    new = pa.table(new_cols).filter(pa.array(keep))
    added = n // 1000
    extra = old.slice(0, added).set_column(
        0, "id", pa.array(np.arange(n, n + added, dtype=np.int64))
    )
    new = pa.concat_tables([new, extra]).combine_chunks()
    return old, new


def table_bytes(t: pa.Table) -> int:
    return sum(
        buf.size
        for col in t.columns
        for chunk in col.chunks
        for buf in chunk.buffers()
        if buf is not None
    )


# ---- the tools ----


# The path backfill's last diff took: "merge" (inputs sorted by the key) or "hash".
last_path = ""


def shuffled(t: pa.Table, seed: int) -> pa.Table:
    return t.take(pa.array(np.random.default_rng(seed).permutation(t.num_rows)))


def run_backfill(
    old: pa.Table,
    new: pa.Table,
    key: list[str] | None = None,
    tolerance: dict[str, float] | None = None,
) -> Counts:
    global last_path
    r = backfill.diff(old, new, key or "id", sample=10, tolerance=tolerance)
    last_path = "merge" if "merge" in r.timings else "hash"
    out = dict(r.changed_columns())
    out["__added"] = r.summary.added
    out["__removed"] = r.summary.removed
    return {k: v for k, v in out.items() if v}


def run_duckdb(
    old: pa.Table,
    new: pa.Table,
    key: list[str] | None = None,
    tolerance: dict[str, float] | None = None,
) -> Counts:
    import duckdb

    key = key or ["id"]
    tolerance = tolerance or {}
    con = duckdb.connect()
    con.execute("set threads to 2")
    con.register("o", old)
    con.register("n", new)

    def differs(c: str) -> str:
        if c in tolerance:
            return (
                f"not (o.{c} is not distinct from n.{c} or abs(n.{c} - o.{c}) <= {tolerance[c]!r})"
            )
        return f"o.{c} is distinct from n.{c}"

    per_col = ", ".join(
        f"count(*) filter (where o.id is not null and n.id is not null and {differs(c)}) as {c}"
        for c in VALUE_COLUMNS
        if c not in key
    )
    on = " and ".join(f"o.{k} = n.{k}" for k in key)
    row = con.execute(
        f"select {per_col}, count(*) filter (where o.id is null) as __added, "
        f"count(*) filter (where n.id is null) as __removed "
        f"from o full outer join n on {on}"
    ).fetchone()
    assert row is not None
    names = [d[0] for d in con.description]
    return {k: int(v) for k, v in zip(names, row, strict=True) if v}


def run_polars_join(old: pa.Table, new: pa.Table) -> Counts:
    import polars as pl

    o = pl.from_arrow(old)
    n = pl.from_arrow(new)
    assert isinstance(o, pl.DataFrame) and isinstance(n, pl.DataFrame)
    j = o.join(n, on="id", how="full", suffix="_new", coalesce=False)
    both = pl.col("id").is_not_null() & pl.col("id_new").is_not_null()
    exprs = [
        (both & pl.col(c).ne_missing(pl.col(c + "_new"))).sum().alias(c) for c in VALUE_COLUMNS
    ]
    exprs += [
        pl.col("id").is_null().sum().alias("__added"),
        pl.col("id_new").is_null().sum().alias("__removed"),
    ]
    row = j.select(exprs).row(0, named=True)
    return {k: int(v) for k, v in row.items() if v}


def run_datacompy(old: pa.Table, new: pa.Table) -> Counts:
    import datacompy
    import polars as pl

    cmp = datacompy.PolarsCompare(pl.from_arrow(old), pl.from_arrow(new), join_columns="id")
    out = {s["column"]: int(s["unequal_cnt"]) for s in cmp.column_stats if s["unequal_cnt"]}
    out["__added"] = cmp.df2_unq_rows.height
    out["__removed"] = cmp.df1_unq_rows.height
    return {k: v for k, v in out.items() if v}


def memory_floor(old: pa.Table, new: pa.Table) -> Counts:
    """One pass that only sums every input buffer as 64-bit words (single thread)."""
    total = 0
    for t in (old, new):
        for col in t.columns:
            for chunk in col.chunks:
                for buf in chunk.buffers():
                    if buf is None or buf.size < 8:
                        continue
                    words = np.frombuffer(buf, dtype=np.uint64, count=buf.size // 8)
                    total += int(words.sum(dtype=np.uint64))
    return {"__floor": 1 if total >= 0 else 0}


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(old_path: str, new_path: str) -> None:
    """Diffs two memory-mapped IPC files and prints peak RSS against the inputs' size."""
    start = _status_bytes("VmRSS")  # the interpreter and libraries
    old = pa.ipc.open_file(pa.memory_map(old_path)).read_all()
    new = pa.ipc.open_file(pa.memory_map(new_path)).read_all()
    base = _status_bytes("VmRSS")
    backfill.diff(old, new, "id")
    peak = _status_bytes("VmHWM")  # ru_maxrss would carry the parent's peak across exec
    print(f"{table_bytes(old) + table_bytes(new)} {start} {base} {peak}")


def measure_memory(old: pa.Table, new: pa.Table) -> tuple[int, int, int, int]:
    """(input bytes, RSS of the bare interpreter, RSS once loaded, peak RSS) of a diff in a
    fresh process over memory-mapped IPC files."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, t in (("old", old), ("new", new)):
            path = f"{tmp}/{name}.arrow"
            with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, t.schema) as w:
                w.write_table(t)
            paths.append(path)
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", *paths],
            capture_output=True,
            text=True,
            check=True,
        )
    size, start, base, peak = (int(x) for x in out.stdout.split())
    return size, start, base, peak


Tool = Callable[[pa.Table, pa.Table], Counts]


def compare(
    title: str, old: pa.Table, new: pa.Table, tools: list[tuple[str, Tool]], repeat: int
) -> tuple[dict[str, float], dict[str, float], bool]:
    """Runs every tool `repeat` times, interleaved (one run of each tool per round, so that a
    change of load on the shared machine hits all of them alike), checks that their counts
    agree with backfill's and prints medians and ratios. Returns (wall medians, CPU medians,
    whether all agree)."""
    walls: dict[str, list[float]] = {name: [] for name, _ in tools}
    cpus: dict[str, list[float]] = {name: [] for name, _ in tools}
    counts: dict[str, Counts] = {}
    path = ""
    for _ in range(repeat):
        for name, fn in tools:
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            counts[name] = fn(old, new)
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(time.process_time() - c0)
            if name == "backfill":
                path = last_path
    wall = {k: statistics.median(v) for k, v in walls.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    reference = counts["backfill"]
    ok = True
    print(
        f"== {title} (backfill took the {path} path; median of {repeat}, interleaved; "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())})"
    )
    for name in wall:
        note = ""
        if name not in ("backfill", "memory floor") and counts[name] != reference:
            ok = False
            note = f"  MISMATCH: {counts[name]} vs backfill {reference}"
        ratio = (
            ""
            if name == "backfill"
            else (
                f"  = {wall[name] / wall['backfill']:6.2f}x wall, "
                f"{cpu[name] / cpu['backfill']:6.2f}x CPU of backfill's"
            )
        )
        print(f"{name:>18}: {wall[name]:8.3f} s wall, {cpu[name]:8.3f} s CPU{ratio}{note}")
    print(f"{'':>18}  per-column change counts: {reference}")
    return wall, cpu, ok


def report_target(what: str, got: float, need: float, higher_is_better: bool = True) -> bool:
    met = got >= need if higher_is_better else got <= need
    print(f"target {what}: {'met' if met else 'NOT met'} ({got:.2f}x)")
    return met


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="small table, one run (for tests)")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--skip", default="", help="comma-separated tools to skip")
    args = ap.parse_args(argv)
    if args.memory_child:
        memory_child(*args.memory_child)
        return 0
    n = args.rows or (100_000 if args.quick else 10_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    skip = set(filter(None, args.skip.split(",")))

    t0 = time.perf_counter()
    old, new = make_tables(n)
    in_bytes = table_bytes(old) + table_bytes(new)
    print(
        f"tables: {old.num_rows:,} old / {new.num_rows:,} new rows, "
        f"{in_bytes / 1e9:.2f} GB of buffers (made in {time.perf_counter() - t0:.1f} s); "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    s_old, s_new = shuffled(old, 1), shuffled(new, 2)

    for what, o_t, n_t in (
        ("key-ordered (merge path)", old, new),
        ("shuffled (hash path)", s_old, s_new),
    ):
        size, start, _, peak = measure_memory(o_t, n_t)
        used = peak - start  # inputs as the diff touches them + the diff's own memory
        report_target(
            f"peak RSS <= 1.3x the inputs, {what} (fresh process, inputs "
            f"memory-mapped: {size / 1e9:.3f} GB; peak RSS {peak / 1e9:.3f} GB, of "
            f"which {start / 1e9:.3f} GB is the bare interpreter)",
            used / size,
            1.3,
            higher_is_better=False,
        )

    have_datacompy = importlib.util.find_spec("datacompy") is not None
    if not have_datacompy:
        print("datacompy is not installed: its targets are not measured")

    def tools(*names: str) -> list[tuple[str, Tool]]:
        every: dict[str, Tool] = {
            "backfill": run_backfill,
            "memory floor": memory_floor,
            "duckdb": run_duckdb,
            "polars join": run_polars_join,
        }
        if have_datacompy:
            every["datacompy polars"] = run_datacompy
        return [(x, every[x]) for x in names if x in every and x not in skip]

    ok = True
    # The main workload: both sides in key order (the merge path).
    wall, _, agree = compare(
        "key-ordered rows, key id",
        old,
        new,
        tools("backfill", "memory floor", "duckdb", "polars join", "datacompy polars"),
        repeat,
    )
    ok &= agree
    base = wall["backfill"]
    for name, need, what in [
        ("duckdb", 3.0, ">= 3x faster than DuckDB"),
        ("datacompy polars", 20.0, ">= 20x faster than datacompy"),
        ("polars join", 1.0, "faster than a polars join diff"),
    ]:
        if name in wall:
            report_target(f"{what}, key-ordered", wall[name] / base, need)
    if "memory floor" in wall:
        report_target(
            "merge path within 4x of the memory floor",
            base / wall["memory floor"],
            4.0,
            higher_is_better=False,
        )

    # The same rows shuffled on both sides (the hash path: tables read from a warehouse).
    wall, _, agree = compare(
        "shuffled rows, key id",
        s_old,
        s_new,
        tools("backfill", "duckdb", "polars join", "datacompy polars"),
        repeat,
    )
    ok &= agree
    base = wall["backfill"]
    for name, need, what in [
        ("duckdb", 6.0, ">= 6x faster than DuckDB"),
        ("datacompy polars", 20.0, ">= 20x faster than datacompy"),
    ]:
        if name in wall:
            report_target(f"{what}, shuffled", wall[name] / base, need)

    # A composite key (id, d): over the key-ordered rows (sorted by (id, d) too: the merge
    # path), and over the shuffled rows (the hash path).
    key2 = ["id", "d"]
    for what, o_t, n_t in (("key-ordered", old, new), ("shuffled", s_old, s_new)):
        wall, _, agree = compare(
            f"composite key (id, d), {what} rows",
            o_t,
            n_t,
            [
                ("backfill", lambda o, n: run_backfill(o, n, key2)),
                ("duckdb", lambda o, n: run_duckdb(o, n, key2)),
            ],
            repeat,
        )
        ok &= agree
        report_target(
            f">= 4x faster than DuckDB, composite key, {what} ({last_path} path)",
            wall["duckdb"] / wall["backfill"],
            4.0,
        )
    del s_old, s_new

    # No target: a tolerance is no cliff.
    tol = {"f1": 1.5}
    _, _, agree = compare(
        "tolerance on f1 (abs 1.5)",
        old,
        new,
        [
            ("backfill", lambda o, n: run_backfill(o, n, None, tol)),
            ("duckdb", lambda o, n: run_duckdb(o, n, None, tol)),
        ],
        repeat,
    )
    ok &= agree
    print("all tools agree" if ok else "TOOLS DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
