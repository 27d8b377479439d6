"""``backfill lint FILE...``: lint model files; exit 1 when an error-severity finding is active."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..lint import DIALECTS, RULES, LintResult, lint_sql
from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .helptext import add_command

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "lint",
        "lint SQL models for backfill hazards",
        description="Lint SQL models (dbt Jinja too) for what makes re-running a past period "
        "unsafe.",
        examples="""\
It finds clock reads (now(), current_date), nondeterminism (random(), row_number() without
ORDER BY), reads of partitioned inputs not restricted to the run's period, and appends.
Directories are searched for *.sql files; '-' reads standard input. Exit 1 when an error is found.

examples:
  backfill lint models/ --partitioned clean_orders,clean_order_items
  backfill lint models/fct_sales_7d.sql --ignore CLOCK_READ="as_of is passed in"
  cat model.sql | backfill lint - --dialect postgres --json""",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="model files or directories")
    p.add_argument(
        "--dialect",
        default="duckdb",
        choices=DIALECTS,
        help="SQL dialect of the models (default duckdb)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--partitioned",
        action="append",
        default=[],
        metavar="NAME",
        help="an input partitioned by period (repeatable, or comma-separated)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODE[=REASON]",
        help=f"switch a rule off, with a reason (rules: {', '.join(RULES)})",
    )
    p.add_argument(
        "--severity",
        action="append",
        default=[],
        metavar="CODE=LEVEL",
        help="override a rule's severity (error, warning, info)",
    )
    p.add_argument(
        "--period-params",
        default="start,end",
        metavar="NAMES",
        help="Jinja/SQL parameters that carry the run's period (default start,end)",
    )
    mb = p.add_mutually_exclusive_group()
    mb.add_argument(
        "--microbatch",
        dest="microbatch",
        action="store_true",
        default=None,
        help="dbt microbatch filters ref()/source() by batch",
    )
    mb.add_argument("--no-microbatch", dest="microbatch", action="store_false")
    p.set_defaults(func=run)


def _expand(files: list[str]) -> list[str]:
    out: list[str] = []
    for f in files:
        if f != "-" and os.path.isdir(f):
            out.extend(sorted(str(p) for p in Path(f).rglob("*.sql") if p.is_file()))
        else:
            out.append(f)
    return out


def run(args: argparse.Namespace) -> int:
    files = _expand(args.files)
    if not files:
        sys.stderr.write(f"backfill lint: error: no .sql files found in {', '.join(args.files)}\n")
        return EXIT_USAGE
    partitioned = [n.strip() for arg in args.partitioned for n in arg.split(",") if n.strip()]
    ignore = dict(
        (item.split("=", 1)[0].strip(), item.split("=", 1)[1].strip())
        if "=" in item
        else (item.strip(), "")
        for item in args.ignore
    )
    severity: dict[str, str] = {}
    for item in args.severity:
        code, sep, level = item.partition("=")
        if not sep:
            sys.stderr.write(f"backfill lint: error: --severity {item!r} is not CODE=LEVEL\n")
            return EXIT_USAGE
        severity[code.strip()] = level.strip()
    periods = [n.strip() for n in args.period_params.split(",") if n.strip()]
    results: list[LintResult] = []
    for name in files:
        try:
            data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except OSError as exc:
            sys.stderr.write(f"backfill lint: error: cannot read {name}: {exc.strerror}\n")
            return EXIT_USAGE
        results.append(
            lint_sql(
                data,
                dialect=args.dialect,
                partitioned_inputs=partitioned,
                ignore=ignore,
                microbatch=args.microbatch,
                severity=severity,
                period_params=periods,
                path="<stdin>" if name == "-" else name,
            )
        )
    errors = sum(len(r.errors) for r in results)
    if args.json:
        rows = [d for r in results for d in r.to_dicts()]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        lines = []
        for r in results:
            for f in r.all:
                lines.append(f.format())
                if not f.suppressed and f.hint:
                    lines.append(f"    hint: {f.hint}")
        warnings = sum(len(r.warnings) for r in results)
        suppressed = sum(len(r.suppressed) for r in results)
        lines.append(
            f"{errors} error(s), {warnings} warning(s), {suppressed} suppressed "
            f"in {len(results)} file(s)"
        )
        sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_FAILED if errors else EXIT_OK
