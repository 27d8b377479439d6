"""Audit at scale: ``Backfill.audit()`` against a DuckDB FULL OUTER JOIN diff (issue 18, target 3).

    python benchmarks/audit_bench.py                      # 100M rows, 365 days (a few minutes)
    python benchmarks/audit_bench.py --dir /tmp/fact      # keep (and reuse) the built project
    python benchmarks/audit_bench.py --quick              # 1M rows, one run each (the test suite)

The workload is ``scale_fact``'s: the fact table built over 365 daily partitions, the fix put in,
then a real backfill of the 90-day window (``Project.plan/backfill/run``, default batching) in
which the 9 promotion days differ. Both competitors compare the published rows with the audit
area's over the 90 days and give the same outputs (per-column change counts, rows added,
removed); the benchmark checks they agree before timing anything.

* audit: ``Backfill.audit()`` -- in-engine fingerprints of the 90 partitions, the key and
  measure totals, then the C++ diff of the differing partitions only (its time split is the
  report's ``timings``);
* duckdb: one ``FULL OUTER JOIN`` of the two versions on the key over the 90 days, counting
  ``IS DISTINCT FROM`` per column (``SET memory_limit`` caps it; threads as DuckDB chooses).

Each run is a fresh child process (its VmHWM is the peak RSS); the competitors alternate.
Target: audit >= 5x faster than the join, audit peak RSS <= 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_fact

TARGET_RATIO = 5.0
TARGET_RSS_MB = 2048.0
KEY = "line_id"


def prepare(root: Path, rows: int) -> str:
    """The project at ``root`` built, fixed and backfilled over the window (reused when done);
    returns the backfill id."""
    marker = root / "BENCH_BACKFILL"
    if marker.exists():
        return marker.read_text().strip()
    import backfill

    began = time.perf_counter()
    scale_fact.create(root, rows=rows)
    scale_fact.build(root)
    scale_fact.fix(root)
    project = backfill.Project.load(root)
    plan = project.plan("*", scale_fact.WINDOW_START, scale_fact.WINDOW_END)
    bf = project.backfill(plan, reason="apply promo_pct")
    status = bf.run()
    if not status.ok:
        raise RuntimeError(f"backfill failed: {status}")
    bf.engine.close()
    marker.write_text(bf.id)
    print(f"prepared {rows:,} rows in {time.perf_counter() - began:.0f} s: {bf.id}", flush=True)
    return bf.id


# -- the competitors (each in its own process) --------------------------------------------------
def run_audit(root: Path, backfill_id: str) -> dict[str, Any]:
    import backfill

    bf = backfill.Backfill.open(backfill_id, project=root)
    began = time.perf_counter()
    report = bf.audit()
    seconds = time.perf_counter() - began
    a = report[scale_fact.MODEL]
    d = a.diff
    assert d is not None, "the backfill changed nothing"
    changed = {r["column"]: int(r["changed"]) for r in d.columns.to_pylist()}
    return {
        "seconds": seconds,
        "timings": a.timings,
        "diff_timings": d.timings,
        "added": d.summary.added,
        "removed": d.summary.removed,
        "changed": d.summary.changed,
        "columns": changed,
        "differing": len(a.differing),
        "partitions": len(a.partitions),
        "key": a.key,
    }


def run_duckdb(root: Path, backfill_id: str, memory_limit: str) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET TimeZone = 'UTC'")
    old = f'main."{scale_fact.MODEL}"'
    new = f'"audit_{backfill_id}"."{scale_fact.MODEL}"'
    names = [c[0] for c in con.execute(f"SELECT * FROM {old} LIMIT 0").description]
    cols = [c for c in names if c != KEY]
    where = (
        f"ordered_at >= TIMESTAMP '{scale_fact.WINDOW_START}' AND "
        f"ordered_at < TIMESTAMP '{scale_fact.WINDOW_END}'"
    )
    both = f"o.{KEY} IS NOT NULL AND n.{KEY} IS NOT NULL"
    per_col = ", ".join(
        f'count(*) FILTER (WHERE {both} AND o."{c}" IS DISTINCT FROM n."{c}")' for c in cols
    )
    any_col = " OR ".join(f'o."{c}" IS DISTINCT FROM n."{c}"' for c in cols)
    sql = (
        f"SELECT count(*) FILTER (WHERE o.{KEY} IS NULL), "
        f"count(*) FILTER (WHERE n.{KEY} IS NULL), "
        f"count(*) FILTER (WHERE {both} AND ({any_col})), {per_col} "
        f"FROM (SELECT * FROM {old} WHERE {where}) o "
        f"FULL OUTER JOIN (SELECT * FROM {new} WHERE {where}) n ON o.{KEY} = n.{KEY}"
    )
    began = time.perf_counter()
    row = con.execute(sql).fetchone()
    seconds = time.perf_counter() - began
    assert row is not None
    return {
        "seconds": seconds,
        "added": row[0],
        "removed": row[1],
        "changed": row[2],
        "columns": dict(zip(cols, row[3:], strict=True)),
    }


def _peak_rss_mb() -> float:
    """This process's peak RSS in MB. VmHWM, not ru_maxrss: ru_maxrss survives exec, so a child
    started by a parent that built the table in-process reported the parent's peak (both
    competitors showed the same 1857 MB at 20M rows)."""
    m = re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())
    if m is None:
        raise RuntimeError("no VmHWM in /proc/self/status")
    return int(m.group(1)) / 1024


def child(which: str, root: Path, backfill_id: str, memory_limit: str) -> dict[str, Any]:
    """Runs one competitor in a fresh process; its result plus the process's peak RSS (MB)."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            which,
            "--dir",
            str(root),
            "--backfill",
            backfill_id,
            "--memory-limit",
            memory_limit,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def agree(audit: dict[str, Any], duck: dict[str, Any]) -> list[str]:
    """Where the two results differ (empty when they agree)."""
    problems = [
        f"{k}: audit {audit[k]:,} vs duckdb {duck[k]:,}"
        for k in ("added", "removed", "changed")
        if audit[k] != duck[k]
    ]
    cols = dict(duck["columns"])
    mine = {c: audit["columns"].get(c, 0) for c in cols}
    if mine != cols or set(audit["columns"]) - set(cols):
        problems.append(f"per-column changes: audit {audit['columns']} vs duckdb {cols}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1M rows, one run each")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--dir", type=Path, default=None, help="project dir (kept; reused)")
    ap.add_argument("--memory-limit", default="8GB", help="DuckDB memory_limit of the baseline")
    ap.add_argument("--child", choices=["audit", "duckdb"], help=argparse.SUPPRESS)
    ap.add_argument("--backfill", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        result = (
            run_audit(args.dir, args.backfill)
            if args.child == "audit"
            else run_duckdb(args.dir, args.backfill, args.memory_limit)
        )
        result["rss_mb"] = _peak_rss_mb()
        print(json.dumps(result))
        return 0

    rows = args.rows or (1_000_000 if args.quick else 100_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    tmp = None
    root = args.dir
    if root is None:
        tmp = tempfile.mkdtemp(prefix="audit_bench_")
        root = Path(tmp)
    try:
        backfill_id = prepare(root, rows)
        runs: dict[str, list[dict[str, Any]]] = {"audit": [], "duckdb": []}
        for _ in range(repeat):  # interleaved: the machine's load hits both alike
            for which in runs:
                runs[which].append(child(which, root, backfill_id, args.memory_limit))
        audit, duck = runs["audit"][-1], runs["duckdb"][-1]
        problems = agree(audit, duck)
        return report(rows, repeat, runs, problems)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def report(
    rows: int, repeat: int, runs: dict[str, list[dict[str, Any]]], problems: list[str]
) -> int:
    a = runs["audit"][-1]
    med = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
    rss = {k: max(r["rss_mb"] for r in v) for k, v in runs.items()}
    ratio = med["duckdb"] / med["audit"]
    print(
        f"audit at scale: {rows:,} rows over {scale_fact.DAYS} days; backfill of "
        f"{a['partitions']} partitions, {a['differing']} differ; key {', '.join(a['key'])}; "
        f"median of {repeat}; load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"  rows: {a['changed']:,} changed, {a['added']:,} added, {a['removed']:,} removed; "
        f"changed columns: " + ", ".join(f"{c} {n:,}" for c, n in a["columns"].items() if n)
    )
    print(f"  {'':28}{'seconds':>10}{'peak RSS MB':>14}")
    print(f"  {'audit (Backfill.audit)':28}{med['audit']:10.2f}{rss['audit']:14.0f}")
    print(f"  {'duckdb FULL OUTER JOIN':28}{med['duckdb']:10.2f}{rss['duckdb']:14.0f}")
    split = {
        k: statistics.median(r["timings"].get(k, 0.0) for r in runs["audit"]) for k in a["timings"]
    }
    print("  audit split (median s): " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    print(
        "  diff phases (last run, s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in a["diff_timings"].items())
    )
    print(f"  results agree: {'yes' if not problems else 'NO'}")
    for p in problems:
        print(f"    {p}")
    met_speed = ratio >= TARGET_RATIO
    met_rss = rss["audit"] <= TARGET_RSS_MB
    print(
        f"  target audit >= {TARGET_RATIO:g}x faster than the join: {ratio:.1f}x -- "
        f"{'met' if met_speed else 'NOT met'}"
    )
    print(
        f"  target audit peak RSS <= {TARGET_RSS_MB:.0f} MB: {rss['audit']:.0f} MB -- "
        f"{'met' if met_rss else 'NOT met'}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
