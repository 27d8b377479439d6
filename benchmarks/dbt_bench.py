"""A backfill through dbt against dbt's own ``dbt run --select fct_daily_sales+
--event-time-start A --event-time-end B``, on the dbt shop.

    python benchmarks/dbt_bench.py            # 240 orders a day, 2026-07-01..2026-09-30, 61 days
    python benchmarks/dbt_bench.py --quick    # 12 orders a day, 2026-07-20..2026-08-20, 21 days

Side by side, each on a fresh copy of the same built warehouse: dbt itself (writes the published
tables in place), and backfill's dbt engine at concurrency 1 and 8, both into an audit area
(either way the runner hands the engine every ready task at once and dbt runs them in two
invocations: the 61 days of fct_daily_sales, then the months and the 7-day table). The
benchmark checks that backfill's audit area holds exactly the rows dbt wrote, then prints the
medians, the ratios against the targets of issue 18 (c=8 <= 1.15x dbt run, c=1 <= 1.5x) and
the load average.

Both sides parse the project once: ``dbt run`` fully (the copy moved the warehouse file, so
dbt's partial-parse state no longer matches the profile), backfill once per backfill for its
generated profile; its invocations then reuse that parsed manifest.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

import backfill
from backfill.examples import dbt_shop
from backfill.integrations.dbt.invoke import invoke
from backfill.integrations.dbt.profile import GENERATED_TARGET, read_profile, write_profile

SELECT = "fct_daily_sales+"


def dbt(root: Path, *args: str) -> float:
    profiles = write_profile(read_profile(root), root / ".bench", schema="main")
    began = time.perf_counter()
    res = invoke(
        list(args),
        project_dir=root,
        profiles_dir=profiles,
        target=GENERATED_TARGET,
        target_path=root / ".bench" / "target",
    )
    if not res.success:
        raise SystemExit(f"dbt {' '.join(args)} failed: {res.errors}")
    return time.perf_counter() - began


def digest(root: Path, relation: str, where: str = "TRUE") -> tuple[int, int]:
    con = duckdb.connect(str(root / "warehouse.duckdb"))
    try:
        cols = [d[0] for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description]
        row = con.execute(
            f"SELECT count(*), coalesce(sum(hash({', '.join(sorted(cols))})"
            f"::HUGEINT), 0) FROM {relation} WHERE {where}"
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, one repeat")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="a JSON line with the results last")
    args = ap.parse_args()
    if args.quick:
        first, last, per_day, start, end = (
            dt.date(2026, 7, 20),
            dt.date(2026, 8, 20),
            12,
            "2026-08-01",
            "2026-08-22",
        )
    else:
        first, last, per_day, start, end = (
            dt.date(2026, 7, 1),
            dt.date(2026, 9, 30),
            240,
            "2026-08-01",
            "2026-10-01",
        )
    repeat = args.repeat or (1 if args.quick else 3)
    work = Path(tempfile.mkdtemp(prefix="dbt_bench_"))
    try:
        built = dbt_shop.create(work / "built", orders_per_day=per_day, first=first, last=last)
        dbt(built, "seed")
        dbt(
            built,
            "run",
            "--event-time-start",
            first.isoformat(),
            "--event-time-end",
            (last + dt.timedelta(days=1)).isoformat(),
        )
        dbt_shop.fix(built)
        backfill.Project.from_dbt(built)  # parse once, so copies start with a fresh manifest
        times: dict[str, list[float]] = {"dbt run": [], "backfill c=1": [], "backfill c=8": []}
        tasks: dict[str, int] = {}
        invocations: dict[str, int] = {}
        parses: dict[str, int] = {}
        same = True
        for i in range(repeat):
            ref = shutil.copytree(built, work / f"dbt{i}")
            times["dbt run"].append(
                dbt(
                    ref,
                    "run",
                    "--select",
                    SELECT,
                    "--event-time-start",
                    start,
                    "--event-time-end",
                    end,
                )
            )
            where = f"sales_date >= DATE '{start}' AND sales_date < DATE '{end}'"
            expected = digest(ref, "main.fct_daily_sales", where)
            for conc in (1, 8):
                root = shutil.copytree(built, work / f"bf{conc}_{i}")
                p = backfill.Project.from_dbt(root)
                plan = p.plan(SELECT, start, end, propagate="clip", as_of="2027-01-01")
                bf = p.backfill(plan, reason="bench")
                began = time.perf_counter()
                status = bf.run(concurrency=conc)
                times[f"backfill c={conc}"].append(time.perf_counter() - began)
                if not status.ok:
                    raise SystemExit(str(status))
                got = digest(root, f'"audit_{bf.id}".fct_daily_sales')
                same = same and got == expected
                tasks = {"tasks": plan.task_count}
                invocations[f"c={conc}"] = bf.engine.invocations  # type: ignore[attr-defined]
                parses[f"c={conc}"] = bf.engine.manifests.parses  # type: ignore[attr-defined]
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"backfill {SELECT} {start}..{end} through dbt ({tasks['tasks']} tasks), "
            f"median of {repeat}:"
        )
        for k, v in med.items():
            extra = (
                f", {invocations[k.split()[-1]]} dbt invocations, {parses[k.split()[-1]]} parse"
                if k != "dbt run"
                else ""
            )
            print(f"  {k:<14} {v:7.2f} s{extra}")
        print(f"audit rows identical to dbt's: {same}")
        ratios = {f"c={c}": med[f"backfill c={c}"] / med["dbt run"] for c in (1, 8)}
        for c, goal in (("c=8", 1.15), ("c=1", 1.5)):
            print(
                f"target backfill {c} / dbt run <= {goal}: {ratios[c]:.2f} "
                f"{'met' if ratios[c] <= goal else 'NOT met'}"
            )
        print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if args.json:
            print(
                json.dumps(
                    {
                        "identical": same,
                        "median": med,
                        "invocations": invocations,
                        "ratios": ratios,
                        "parses": parses,
                        **tasks,
                    }
                )
            )
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
