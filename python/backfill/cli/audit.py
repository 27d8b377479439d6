"""``backfill estimate | audit | publish | discard | changelog | check | diff | demo``.

    backfill estimate --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 --concurrency 10
    backfill audit [ID] [--gates '{fct_daily_sales: [{removed_rows: 0}]}']
    backfill publish [ID] --note "..." [--force "why a failed gate is fine"]
    backfill discard [ID]
    backfill changelog [--backfill ID]
    backfill check MODEL --partition 2026-08-03
    backfill diff OLD NEW --key K [--partition-by C --grain day --tz UTC]
    backfill demo [--dir DIR]

All take ``--project DIR`` (default: the current directory) and ``--json``. Exit codes: 0 ok;
1 the work failed (a gate failed, publish refused, a check found a difference, diff found one);
2 usage or input error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import ConflictError, InvalidInputError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _write(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")


def _dump(value: Any) -> None:
    _write(json.dumps(value, indent=2, default=str))


def _busy(text: str) -> contextlib.AbstractContextManager[Any]:
    """A spinner on stderr while work runs (only on a terminal)."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(text)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", default=".", help="project directory (default: current)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _period(p: argparse.ArgumentParser) -> None:
    p.add_argument("--select", required=True, help='dbt selector, e.g. "fct_daily_sales+"')
    p.add_argument("--exclude", help="dbt selector of models to leave out")
    p.add_argument("--start", required=True, help="period start (ISO date or date-time)")
    p.add_argument("--end", required=True, help="period end, exclusive")
    p.add_argument("--tz", help="time zone of naive --start/--end (default UTC)")
    p.add_argument("--as-of", help="only partitions ended by then (default: now)")
    p.add_argument("--partitions-per-run", type=int, default=1, metavar="N")
    p.add_argument("--concurrency", type=int, default=4, metavar="N",
                   help="tasks at once (default 4)")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("estimate", help="time one sample partition per model; estimate the plan")
    _common(p)
    _period(p)
    p.set_defaults(func=cmd_estimate)

    p = sub.add_parser("audit", help="diff a backfill's audit area against the published data")
    p.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    _common(p)
    p.add_argument("--gates", help="extra gates as YAML/JSON: {model: [gate, ...]}")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("publish", help="publish an audited backfill atomically")
    p.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    _common(p)
    p.add_argument("--note", required=True, help="what consumers should know (changelog)")
    p.add_argument("--force", metavar="REASON", help="publish despite failed gates, saying why")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("discard", help="drop an unpublished backfill's audit area")
    p.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    _common(p)
    p.set_defaults(func=cmd_discard)

    p = sub.add_parser("changelog", help="what publications changed, for consumers")
    _common(p)
    p.add_argument("--backfill", metavar="ID", help="only this backfill's publication")
    p.set_defaults(func=cmd_changelog)

    p = sub.add_parser("check", help="run a model's partition twice and compare; lint it")
    p.add_argument("model")
    _common(p)
    p.add_argument("--partition", required=True, help="a date (or date-time) in the partition")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("diff", help="diff two tables (files, or tables of the warehouse)")
    p.add_argument("old", help="a .parquet/.csv/.json file, or schema.table in the warehouse")
    p.add_argument("new")
    _common(p)
    p.add_argument("--key", required=True, action="append", help="key column (repeatable)")
    p.add_argument("--partition-by", help="date/timestamp column for per-partition breakdown")
    p.add_argument("--grain", default="day")
    p.add_argument("--tz", default="UTC")
    p.set_defaults(func=cmd_diff)


def add_demo_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = sub.add_parser("demo", help="the shop backfill, end to end",
                       description="Builds the shop with the discount bug, fixes the model, "
                                   "plans, estimates, runs, audits and publishes the backfill.")
    d.add_argument("--dir", help="where to build the shop (default: a new temporary directory)")
    d.add_argument("--orders-per-day", type=int, default=240, help=argparse.SUPPRESS)
    d.add_argument("--concurrency", type=int, default=8, help="tasks at once (default 8)")
    d.set_defaults(func=cmd_demo)


def _project(args: argparse.Namespace) -> Any:
    from ..api import Project

    return Project.load(args.project)


def _plan(args: argparse.Namespace) -> Any:
    project = _project(args)
    plan = project.plan(args.select, args.start, args.end, exclude=args.exclude, tz=args.tz,
                        as_of=args.as_of, partitions_per_run=args.partitions_per_run,
                        concurrency=args.concurrency)
    return project, plan


def cmd_estimate(args: argparse.Namespace) -> int:
    from ..run.estimate import estimate

    project, plan = _plan(args)
    if not plan.ok:
        _write(plan.describe())
        return EXIT_FAILED
    with _busy("running one sample partition per model into scratch..."):
        report = estimate(project, plan, concurrency=args.concurrency)
    _dump(report.to_dict()) if args.json else _write(str(report))
    return EXIT_OK


def _backfill(args: argparse.Namespace) -> Any:
    from ..api import Backfill

    return Backfill.open(args.id, project=Path(args.project))


def cmd_audit(args: argparse.Namespace) -> int:
    gates = None
    if args.gates:
        import yaml  # type: ignore[import-untyped]

        try:
            gates = yaml.safe_load(args.gates)
        except yaml.YAMLError as exc:
            raise InvalidInputError(f"--gates {args.gates!r} is not YAML/JSON: {exc}") from None
    bf = _backfill(args)
    with _busy(f"auditing {bf.id}..."):
        report = bf.audit(gates=gates)
    _dump(report.to_dict()) if args.json else _write(str(report))
    return EXIT_OK if report.passed else EXIT_FAILED


def cmd_publish(args: argparse.Namespace) -> int:
    bf = _backfill(args)
    try:
        with _busy(f"publishing {bf.id}..."):
            pub = bf.publish(note=args.note, force_reason=args.force)
    except ConflictError as exc:
        if args.json:
            _dump({"published": False, "error": str(exc)})
        else:
            sys.stderr.write(f"backfill publish: refused: {exc}\n")
        return EXIT_FAILED
    _dump({"published": True, **pub.to_dict()}) if args.json else _write(str(pub))
    return EXIT_OK


def cmd_discard(args: argparse.Namespace) -> int:
    bf = _backfill(args)
    try:
        bf.discard()
    except ConflictError as exc:
        sys.stderr.write(f"backfill discard: refused: {exc}\n")
        return EXIT_FAILED
    _dump({"discarded": bf.id}) if args.json else _write(f"discarded {bf.id} (audit area dropped)")
    return EXIT_OK


def cmd_changelog(args: argparse.Namespace) -> int:
    log = _project(args).changelog(args.backfill)
    _dump(log.to_dict()) if args.json else _write(str(log))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from ..audit.check import check_run_twice

    with _busy(f"running {args.model} {args.partition} twice..."):
        report = check_run_twice(_project(args), args.model, args.partition)
    _dump(report.to_dict()) if args.json else _write(str(report))
    return EXIT_OK if report.ok else EXIT_FAILED


def _read(cur: Any, spec: str) -> Any:
    path = Path(spec)
    if path.suffix.lower() in (".parquet", ".csv", ".json", ".ndjson", ".tsv"):
        if not path.exists():
            raise InvalidInputError(f"{spec}: no such file")
        literal = "'" + str(path).replace("'", "''") + "'"
        return cur.sql(f"SELECT * FROM {literal}")
    if "." not in spec:
        raise InvalidInputError(f"{spec!r}: expected a .parquet/.csv/.json file or "
                                "schema.table in the project's warehouse")
    from ..engines.duckdb import quote

    schema, _, table = spec.partition(".")
    try:
        return cur.sql(f"SELECT * FROM {quote(schema)}.{quote(table)}")
    except Exception as exc:
        raise InvalidInputError(f"{spec!r}: {exc}") from None


def cmd_diff(args: argparse.Namespace) -> int:
    import duckdb

    from ..audit.diff import diff

    files = all(Path(s).suffix.lower() in (".parquet", ".csv", ".json", ".ndjson", ".tsv")
                for s in (args.old, args.new))
    if files:
        con = duckdb.connect()
    else:
        project = _project(args)
        con = duckdb.connect(str(project.settings.engine.path), read_only=True)
    try:
        options: dict[str, Any] = {}
        if args.partition_by:
            options = dict(partition_by=args.partition_by, grain=args.grain, tz=args.tz)
        result = diff(_read(con, args.old), _read(con, args.new), key=args.key,
                      on_duplicate="report", **options)
    finally:
        con.close()
    if args.json:
        _dump({"summary": result.summary.to_dict(), "key": result.key,
               "changed_columns": result.changed_columns(),
               "columns": result.columns.to_pylist(),
               "partitions": result.partitions.to_pylist()})
    else:
        _write(str(result))
    return EXIT_OK if result.identical else EXIT_FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.dir, orders_per_day=args.orders_per_day, concurrency=args.concurrency)
