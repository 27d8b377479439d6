"""Automatic batching benchmark: the shop's fct_daily_sales+ fix over 89 days (2026-08-01 to
2026-10-29) run three ways on copies of one built shop, DuckDB, same concurrency:

* ``one per model``: partitions_per_run large enough that each model is one task (the floor:
  least per-task overhead, no parallelism within a model);
* ``auto``: partitions_per_run="auto" (the default) with the ledger's history of the initial
  build, as a user gets it after the README's first two commands;
* ``one day``: partitions_per_run=1 (187 tasks; skipped with --quick).

Each way runs ``--repeat`` times on fresh copies; the median wall time of ``Backfill.run`` is
compared. The audit result (per model and measure: totals, deltas, rows added/removed/changed)
must be identical for every way. Also reported: the plan's estimate of the auto run against its
measured makespan.

    python benchmarks/batching_bench.py            # all three, 3 repeats
    python benchmarks/batching_bench.py --quick    # no one-day run, 1 repeat

Target: auto within 1.5x of one task per model (exit 1 when missed, unless --quick, whose single
repeat on a loaded machine is indicative only).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests/python"))

import backfill  # noqa: E402
from shop_support import AS_OF, build, copy_built  # noqa: E402

SELECT, START, END = "fct_daily_sales+", "2026-08-01", "2026-10-29"
TARGET = 1.5


def audit_signature(report: Any) -> Any:
    """What must not depend on how the partitions were grouped into tasks."""
    return json.dumps(
        {m["model"]: m for m in report.to_dict()["models"]}, sort_keys=True, default=str
    )


def one_run(
    built: Path, dest: Path, ppr: int | str, concurrency: int, keep_ledger: bool
) -> dict[str, Any]:
    if keep_ledger:
        shutil.copytree(built, dest)
    else:
        copy_built(built, dest)
    shutil.copy(dest / "fixes/fct_daily_sales.sql", dest / "models/fct_daily_sales.sql")
    project = backfill.Project.load(dest)
    plan = project.plan(
        SELECT, START, END, as_of=AS_OF, partitions_per_run=ppr, concurrency=concurrency
    )
    bf = project.backfill(plan, reason="discount bug fixed")
    began = time.perf_counter()
    status = bf.run(concurrency=concurrency)
    seconds = time.perf_counter() - began
    assert status.ok, str(status)
    report = bf.audit()
    sched = plan.schedule
    return {
        "seconds": seconds,
        "tasks": plan.task_count,
        "estimate": None if sched.assumed else sched.makespan,
        "audit": audit_signature(report),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="no one-day run, 1 repeat")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    ways: dict[str, tuple[int | str, bool]] = {
        "one per model": (10_000, False),
        "auto": ("auto", True),
    }
    if not args.quick:
        ways["one day"] = (1, False)
    results: dict[str, list[dict[str, Any]]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory() as tmp:
        from backfill.examples import shop

        built = shop.create(Path(tmp) / "built")  # the README's shop: 240 orders a day
        build(built)  # the initial build (31 days a task): the ledger's history
        n = 0
        for _ in range(repeat):
            for way, (ppr, keep) in ways.items():  # interleaved: load drifts hit all alike
                n += 1
                results[way].append(
                    one_run(built, Path(tmp) / f"run{n}", ppr, args.concurrency, keep)
                )
    med = {w: statistics.median(r["seconds"] for r in rs) for w, rs in results.items()}
    audits = {r["audit"] for rs in results.values() for r in rs}
    ratio = med["auto"] / med["one per model"]
    for way, rs in results.items():
        print(
            f"{way:>14}: {rs[0]['tasks']:>4} tasks, median {med[way]:.3f} s over {len(rs)} "
            f"run(s) at {args.concurrency} concurrent"
        )
    auto = results["auto"][-1]
    if auto["estimate"] is not None:
        print(f"auto: estimated {auto['estimate']:.3f} s, measured {auto['seconds']:.3f} s")
    met = ratio <= TARGET
    print(
        f"auto / one per model = {ratio:.2f}; target (<= {TARGET}): "
        f"{'met' if met else 'not met'}{' (quick run: indicative only)' if args.quick else ''}"
    )
    print(f"audit results identical across ways: {len(audits) == 1}")
    if args.json:
        print(
            json.dumps(
                {
                    "median_seconds": med,
                    "ratio": ratio,
                    "target": TARGET,
                    "audit_identical": len(audits) == 1,
                    "tasks": {w: rs[0]["tasks"] for w, rs in results.items()},
                }
            )
        )
    if len(audits) != 1:
        return 1
    return 0 if met or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
