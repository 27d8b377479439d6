"""backfill.diff against DuckDB SQL, datacompy (polars), a polars join diff and a memory floor.

    python benchmarks/diff_bench.py            # 10 M rows x 10 columns (the issue's target)
    python benchmarks/diff_bench.py --quick    # 200 k rows, one run each (the test suite)

The table: int64 key, 4 float64, 2 int64, 2 strings, 1 date; 1% of rows changed (one column
each, round robin), 0.1% added, 0.1% removed. Every tool produces per-column change counts plus
added/removed counts; the benchmark checks they all agree, then prints medians and ratios.
The main tables are in key order, so backfill takes its merge path (the run prints which path
ran). Extra workloads (no target) time backfill against DuckDB on the other paths: the same rows
shuffled on both sides (the hash path), a composite key (id, d) and a column compared with a
tolerance.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import resource
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
        rows = np.sort(changed[j:: len(VALUE_COLUMNS)])
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
    extra = old.slice(0, added).set_column(0, "id", pa.array(np.arange(n, n + added, dtype=np.int64)))
    new = pa.concat_tables([new, extra]).combine_chunks()
    return old, new


def table_bytes(t: pa.Table) -> int:
    return sum(buf.size for col in t.columns for chunk in col.chunks
               for buf in chunk.buffers() if buf is not None)


# ---- the tools ----


# Extra workloads (no target; they show that composite keys and tolerances are no cliff):
# name -> (key columns, tolerance per column as absolute differences, rows shuffled).
WORKLOADS: dict[str, tuple[list[str], dict[str, float], bool]] = {
    "shuffled rows": (["id"], {}, True),
    "composite key (id, d)": (["id", "d"], {}, False),
    "tolerance on f1 (abs 1.5)": (["id"], {"f1": 1.5}, False),
}
# The path backfill's last diff took: "merge" (inputs sorted by the key) or "hash".
last_path = ""


def shuffled(t: pa.Table, seed: int) -> pa.Table:
    return t.take(pa.array(np.random.default_rng(seed).permutation(t.num_rows)))


def run_backfill(old: pa.Table, new: pa.Table, key: list[str] | None = None,
                 tolerance: dict[str, float] | None = None) -> Counts:
    global last_path
    r = backfill.diff(old, new, key or "id", sample=10, tolerance=tolerance)
    last_path = "merge" if "merge" in r.timings else "hash"
    out = dict(r.changed_columns())
    out["__added"] = r.summary.added
    out["__removed"] = r.summary.removed
    return {k: v for k, v in out.items() if v}


def run_duckdb(old: pa.Table, new: pa.Table, key: list[str] | None = None,
               tolerance: dict[str, float] | None = None) -> Counts:
    import duckdb

    key = key or ["id"]
    tolerance = tolerance or {}
    con = duckdb.connect()
    con.execute("set threads to 2")
    con.register("o", old)
    con.register("n", new)

    def differs(c: str) -> str:
        if c in tolerance:
            return (f"not (o.{c} is not distinct from n.{c} or "
                    f"abs(n.{c} - o.{c}) <= {tolerance[c]!r})")
        return f"o.{c} is distinct from n.{c}"

    per_col = ", ".join(
        f"count(*) filter (where o.id is not null and n.id is not null and {differs(c)}) as {c}"
        for c in VALUE_COLUMNS if c not in key)
    on = " and ".join(f"o.{k} = n.{k}" for k in key)
    row = con.execute(
        f"select {per_col}, count(*) filter (where o.id is null) as __added, "
        f"count(*) filter (where n.id is null) as __removed "
        f"from o full outer join n on {on}").fetchone()
    assert row is not None
    names = [d[0] for d in con.description]
    return {k: int(v) for k, v in zip(names, row) if v}


def run_polars_join(old: pa.Table, new: pa.Table) -> Counts:
    import polars as pl

    o = pl.from_arrow(old)
    n = pl.from_arrow(new)
    assert isinstance(o, pl.DataFrame) and isinstance(n, pl.DataFrame)
    j = o.join(n, on="id", how="full", suffix="_new", coalesce=False)
    both = pl.col("id").is_not_null() & pl.col("id_new").is_not_null()
    exprs = [(both & pl.col(c).ne_missing(pl.col(c + "_new"))).sum().alias(c)
             for c in VALUE_COLUMNS]
    exprs += [pl.col("id").is_null().sum().alias("__added"),
              pl.col("id_new").is_null().sum().alias("__removed")]
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


def timed(fn: Callable[[pa.Table, pa.Table], Counts], old: pa.Table, new: pa.Table,
          repeat: int) -> tuple[float, float, Counts]:
    """Median wall seconds, median CPU seconds (all threads of this process), the counts."""
    times, cpus = [], []
    counts: Counts = {}
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        counts = fn(old, new)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpus), counts


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
        out = subprocess.run([sys.executable, __file__, "--memory-child", *paths],
                             capture_output=True, text=True, check=True)
    size, start, base, peak = (int(x) for x in out.stdout.split())
    return size, start, base, peak


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
    n = args.rows or (200_000 if args.quick else 10_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    skip = set(filter(None, args.skip.split(",")))

    t0 = time.perf_counter()
    old, new = make_tables(n)
    in_bytes = table_bytes(old) + table_bytes(new)
    print(f"tables: {old.num_rows:,} old / {new.num_rows:,} new rows, "
          f"{in_bytes / 1e9:.2f} GB of buffers (made in {time.perf_counter() - t0:.1f} s)")

    size, start, base, peak = measure_memory(old, new)
    used = peak - start  # inputs as the diff touches them + the diff's own memory
    print(f"memory (fresh process, inputs memory-mapped): inputs {size / 1e9:.3f} GB; peak RSS "
          f"{peak / 1e9:.3f} GB, of which {start / 1e9:.3f} GB is the bare interpreter; "
          f"peak - interpreter = {used / size:.2f}x the inputs "
          f"(target <= 2x: {'met' if used <= 2 * size else 'NOT met'})")
    tools: list[tuple[str, Callable[[pa.Table, pa.Table], Counts], int]] = [
        ("backfill", run_backfill, repeat),
        ("memory floor", memory_floor, repeat),
        ("duckdb", run_duckdb, repeat),
        ("polars join", run_polars_join, repeat),
    ]
    if importlib.util.find_spec("datacompy") is not None:
        tools.append(("datacompy polars", run_datacompy, 1))
    results: dict[str, float] = {}
    cpu: dict[str, float] = {}
    reference: Counts | None = None
    ok = True
    for name, fn, reps in tools:
        if name in skip:
            continue
        secs, cpu_secs, counts = timed(fn, old, new, reps)
        results[name] = secs
        cpu[name] = cpu_secs
        if name == "backfill":
            reference = counts
        elif name != "memory floor":
            agree = counts == reference
            ok &= agree
            if not agree:
                print(f"  MISMATCH {name}: {counts} vs backfill {reference}")
        path = f", {last_path} path" if name == "backfill" else ""
        print(f"{name:>18}: {secs:8.3f} s wall, {cpu_secs:8.3f} s CPU (median of {reps}){path}")
    print(f"per-column change counts: {reference}")
    base = results["backfill"]
    print("ratios (tool time / backfill time), wall and CPU (CPU is less sensitive to other load "
          "on the machine):")
    for name, secs in results.items():
        if name != "backfill":
            print(f"{name:>18}: {secs / base:7.2f}x wall, {cpu[name] / cpu['backfill']:7.2f}x CPU")
    targets = [("duckdb", 3.0, "≥ 3x faster than DuckDB"),
               ("datacompy polars", 20.0, "≥ 20x faster than datacompy"),
               ("polars join", 1.0, "faster than a polars join diff")]
    for name, need, what in targets:
        if name in results:
            got = results[name] / base
            print(f"target {what}: {'met' if got >= need else 'NOT met'} ({got:.2f}x)")
    if "memory floor" in results:
        got = base / results["memory floor"]
        print(f"target within 5x of the memory floor: {'met' if got <= 5 else 'NOT met'} "
              f"({got:.2f}x the floor)")
    ok &= extra_workloads(old, new, repeat, base)
    print("all tools agree" if ok else "TOOLS DISAGREE")
    return 0 if ok else 1


def extra_workloads(old: pa.Table, new: pa.Table, repeat: int, main_secs: float) -> bool:
    """The other key and compare paths: backfill and DuckDB only, counts checked alike."""
    ok = True
    for name, (key, tolerance, shuffle) in WORKLOADS.items():
        o_t, n_t = (shuffled(old, 1), shuffled(new, 2)) if shuffle else (old, new)
        secs, cpu_secs, counts = timed(
            lambda o, n: run_backfill(o, n, key, tolerance), o_t, n_t, repeat)
        path = last_path
        d_secs, _, d_counts = timed(lambda o, n: run_duckdb(o, n, key, tolerance), o_t, n_t, repeat)
        del o_t, n_t
        agree = counts == d_counts
        ok &= agree
        if not agree:
            print(f"  MISMATCH duckdb ({name}): {d_counts} vs backfill {counts}")
        print(f"workload {name}: backfill {secs:.3f} s wall ({cpu_secs:.3f} s CPU, {path} path, "
              f"{secs / main_secs:.2f}x the main workload), duckdb {d_secs:.3f} s: "
              f"{d_secs / secs:.2f}x")
    return ok


if __name__ == "__main__":
    sys.exit(main())
