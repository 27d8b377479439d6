"""Planner benchmark: the C++ planner vs a straightforward Python planner (networkx + datetime).

A generated layered DAG (mostly daily models, some hourly, monthly and unpartitioned ones, 7-day
windows and whole-parent reads) is planned with everything selected. Both planners run in this
process; the task sets (model, start, end, partitions, dependencies) are checked identical.

    python benchmarks/plan_bench.py            # 2,000 models over 3 years (>= 2 M tasks)
    python benchmarks/plan_bench.py --quick    # 200 models over 1 year (for the test suite)

Targets (full size): planning <= 1 s, RSS growth <= 256 bytes per task, >= 100x the Python
planner. RSS is measured in a fresh subprocess so that other allocations do not blur it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backfill
from plan_reference import plan_reference

UTC = dt.timezone.utc
START = dt.datetime(2023, 1, 1, tzinfo=UTC)


def generate(
    models: int, years: int, seed: int = 7, tz: str = "UTC"
) -> tuple[backfill.Project, dict[str, Any]]:
    """A layered DAG: 10 sources, then layers of models reading 1-3 nodes of earlier layers."""
    rng = random.Random(seed)
    p = backfill.Project("bench")
    ref: dict[str, dict[str, Any]] = {}
    previous: list[str] = []
    for i in range(10):
        name = f"raw.s{i}"
        p.source(name, grain="day", event_time="at")
        ref[name] = {"grain": "day", "begin": None, "depends_on": [], "source": True}
        previous.append(name)
    layer_size = max(10, models // 20)
    made = 0
    layer = 0
    while made < models:
        current = []
        for _ in range(min(layer_size, models - made)):
            name = f"l{layer}_m{made}"
            r = rng.random()
            grain = "hour" if r < 0.01 else "month" if r < 0.05 else None if r < 0.06 else "day"
            deps: list[str | backfill.Dependency] = []
            tuples = []
            for parent in rng.sample(previous, k=min(len(previous), rng.randint(1, 3))):
                q = rng.random()
                if grain == "day" and q < 0.15:
                    deps.append(backfill.window(parent, -6, 0))
                    tuples.append((parent, "window", -6, 0))
                elif q < 0.25 and ref[parent]["grain"] in (None, "month"):
                    # Whole-parent reads of small tables (dimensions, monthly rates): reading all
                    # of a daily table from every daily partition would be quadratic.
                    deps.append(backfill.all_of(parent))
                    tuples.append((parent, "all", 0, 0))
                else:
                    deps.append(parent)
                    tuples.append((parent, "overlap", 0, 0))
            begin = START if grain and rng.random() < 0.5 else None
            p.model(name, grain=grain, tz=tz, depends_on=deps, begin=begin, event_time="at")
            ref[name] = {"grain": grain, "begin": begin, "depends_on": tuples, "source": False}
            current.append(name)
            made += 1
        previous = previous[-layer_size:] + current
        layer += 1
    return p, ref


def period(years: int) -> tuple[dt.datetime, dt.datetime, dt.datetime]:
    end = START.replace(year=START.year + years)
    return START, end, end + dt.timedelta(days=40)


def run_core(p: backfill.Project, years: int) -> backfill.Plan:
    start, end, as_of = period(years)
    # one partition per task, as the reference planner plans (and as measured before automatic
    # batching became the default)
    return p.plan("*", start, end, as_of=as_of, partitions_per_run=1)


def core_rows(plan: backfill.Plan) -> tuple[list[Any], list[Any], list[Any], list[Any], list[Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.table(plan.tasks)
    model = t.column("model").cast(pa.string()).to_pylist()
    start = pc.cast(t.column("start"), pa.int64()).to_pylist()
    end = pc.cast(t.column("end"), pa.int64()).to_pylist()
    return model, start, end, t.column("partitions").to_pylist(), t.column("depends_on").to_pylist()


def reference_rows(tasks: list[Any], deps: list[list[int]]) -> tuple[list[Any], ...]:
    def us(x: dt.datetime | None) -> int | None:
        return None if x is None else int(x.timestamp()) * 1_000_000

    return (
        [t[0] for t in tasks],
        [us(t[1]) for t in tasks],
        [us(t[2]) for t in tasks],
        [t[3] for t in tasks],
        deps,
    )


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure_memory(models: int, years: int) -> dict[str, float]:
    """Runs in a fresh process: RSS before and after planning (plan alive), and the peak."""
    p, _ = generate(models, years)
    p.validate()
    gc.collect()
    reset_peak_rss()
    before = rss_bytes()
    plan = run_core(p, years)
    after, peak_after = rss_bytes(), peak_rss_bytes()
    tasks = plan.task_count
    table = plan.tasks
    with_table = rss_bytes()
    return {
        "tasks": tasks,
        "growth_per_task": (after - before) / tasks,
        "peak_growth_per_task": (peak_after - before) / tasks,
        "with_table_per_task": (with_table - before) / tasks,
        "table_rows": table.num_rows,
    }


def gil_check(p: backfill.Project, years: int) -> tuple[float, int]:
    """Counts Python loop iterations in the main thread while another thread plans."""
    result: list[float] = []

    def work() -> None:
        t0 = time.perf_counter()
        run_core(p, years)
        result.append(time.perf_counter() - t0)

    thread = threading.Thread(target=work)
    ticks = 0
    thread.start()
    while thread.is_alive():
        ticks += 1
        time.sleep(0.001)
    thread.join()
    return result[0], ticks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 models over 1 year")
    ap.add_argument("--models", type=int, default=None)
    ap.add_argument("--years", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5, help="C++ runs (median)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--tz",
        default="UTC",
        help="zone of the models: other zones take the calendar-table path (C++ only; "
        "the Python planner is UTC-only)",
    )
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    models = args.models or (200 if args.quick else 2000)
    years = args.years or (1 if args.quick else 3)
    if args.memory_child:
        print(json.dumps(measure_memory(models, years)))
        return 0

    p, ref_models = generate(models, years, tz=args.tz)
    p.validate()
    start, end, as_of = period(years)
    if args.tz != "UTC":
        times, cpu = [], []
        zoned = None
        for _ in range(args.repeat):
            del zoned
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            zoned = run_core(p, years)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        assert zoned is not None
        print(
            f"graph: {models} models over {years} year(s) in {args.tz}; "
            f"{zoned.task_count:,} tasks, {zoned.dependency_count:,} dependencies"
        )
        print(
            f"C++ planner ({args.tz}, calendar tables): "
            f"{statistics.median(times) * 1000:.1f} ms wall, "
            f"{statistics.median(cpu) * 1000:.1f} ms CPU (medians of {args.repeat})"
        )
        return 0

    # Wall time is what users see; CPU time (this process) is reported too because the machine
    # may be shared and a loaded CPU inflates wall time.
    core_times, core_cpu, table_times, table_cpu = [], [], [], []
    plan = table = None
    for _ in range(args.repeat):
        del plan, table
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        plan = run_core(p, years)
        t1, c1 = time.perf_counter(), time.process_time()
        table = plan.tasks  # the Arrow task table, built in C++ on first access
        core_times.append(t1 - t0)
        core_cpu.append(c1 - c0)
        table_times.append(time.perf_counter() - t1)
        table_cpu.append(time.process_time() - c1)
    assert plan is not None and table is not None
    core_s = statistics.median(core_times)
    core_cpu_s = statistics.median(core_cpu)
    table_s = statistics.median(table_times)
    table_cpu_s = statistics.median(table_cpu)
    print(
        f"graph: {models} models over {years} year(s); {plan.task_count:,} tasks, "
        f"{plan.dependency_count:,} dependencies, {plan.wave_count} waves"
    )
    print(
        f"C++ planner:    {core_s * 1000:8.1f} ms wall, {core_cpu_s * 1000:.1f} ms CPU "
        f"(medians of {args.repeat}; CPU counts both cores)"
    )
    print(
        f"Arrow task table: {table_s * 1000:6.1f} ms wall, {table_cpu_s * 1000:.1f} ms CPU "
        f"({table.num_rows:,} rows; medians of {args.repeat})"
    )

    py_times, py_cpu = [], []
    ref = None
    for _ in range(1 if not args.quick else 3):
        del ref
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        ref = plan_reference(ref_models, p.select("*"), start, end, as_of)
        py_times.append(time.perf_counter() - t0)
        py_cpu.append(time.process_time() - c0)
    assert ref is not None
    py_s = statistics.median(py_times)
    py_cpu_s = statistics.median(py_cpu)
    print(
        f"Python planner: {py_s * 1000:8.1f} ms wall, {py_cpu_s * 1000:.1f} ms CPU "
        f"(networkx + datetime, median of {len(py_times)})"
    )

    identical = core_rows(plan) == reference_rows(*ref)
    print(f"task sets identical: {identical}")
    ratio = py_s / core_s
    print(
        f"ratio Python / C++: {ratio:.0f}x wall, {py_cpu_s / core_cpu_s:.0f}x CPU "
        f"(planning; with the Arrow table too: {py_s / (core_s + table_s):.0f}x wall)"
    )

    # The Python planner's millions of objects would make a cyclic GC pass land inside the timing.
    del ref
    gc.collect()
    plan_s, ticks = gil_check(p, years)
    print(
        f"GIL: main thread ran {ticks} loop iterations during a {plan_s * 1000:.0f} ms plan "
        "in another thread"
    )

    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--memory-child",
            "--models",
            str(models),
            "--years",
            str(years),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    mem = json.loads(child.stdout)
    print(
        f"RSS growth: {mem['growth_per_task']:.0f} B/task with the plan alive "
        f"(peak {mem['peak_growth_per_task']:.0f} B/task while planning; "
        f"{mem['with_table_per_task']:.0f} B/task with the Arrow table too)"
    )

    results = {
        "models": models,
        "years": years,
        "tasks": plan.task_count,
        "core_seconds": core_s,
        "python_seconds": py_s,
        "ratio": ratio,
        "core_cpu_seconds": core_cpu_s,
        "python_cpu_seconds": py_cpu_s,
        "table_seconds": table_s,
        "table_cpu_seconds": table_cpu_s,
        "identical": identical,
        "rss_growth_per_task": mem["growth_per_task"],
        "peak_rss_growth_per_task": mem["peak_growth_per_task"],
        "gil_ticks": ticks,
    }
    if args.json:
        print(json.dumps(results))
    if not identical:
        print("FAIL: the planners disagree", file=sys.stderr)
        return 1
    if not args.quick:
        misses = [
            name
            for name, ok in (
                ("planning <= 1 s", core_s <= 1.0),
                ("RSS growth <= 256 B/task", mem["growth_per_task"] <= 256),
                (">= 100x the Python planner", ratio >= 100),
                (">= 2 M tasks", plan.task_count >= 2_000_000),
            )
            if not ok
        ]
        print("targets: " + ("all met" if not misses else "MISSED " + ", ".join(misses)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
