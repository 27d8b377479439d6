"""``backfill audit`` and ``backfill diff``: what a backfill changes, what two tables differ in.

    backfill audit [ID] [--gates '{fct_daily_sales: [{removed_rows: 0}]}']
    backfill diff OLD NEW --key K [--partition-by C --grain day --tz UTC]

Both take ``--project DIR`` and ``--json``. Exit 1 when a gate failed (``audit``) or the tables
differ (``diff``); 2 for usage or input errors.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import duckdb
import yaml  # type: ignore[import-untyped]

from ..audit.diff import diff
from ..engines.duckdb import quote
from ..errors import InvalidInputError
from .common import (
    add_ledger_option,
    add_project_options,
    busy,
    dump,
    open_backfill,
    open_project,
    write,
)
from .exit_codes import EXIT_FAILED, EXIT_OK
from .helptext import add_command

__all__ = ["add_audit_parser", "add_diff_parser"]

# Files `diff` reads directly; anything else is a schema.table of the project's warehouse.
_FILE_SUFFIXES = (".parquet", ".csv", ".json", ".ndjson", ".tsv")


def add_audit_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "audit",
        "diff a backfill's audit area against the published data",
        description="Diff a backfill's audit area against the published data, per partition; "
        "check the gates.",
        examples="""\
Gates (limits on what may change) come from backfill.yml; --gates adds some for this
audit. Exit 0 when every gate passes, 1 when one fails; then `backfill publish` refuses
unless given --force REASON.

examples:
  backfill audit                   the latest backfill
  backfill audit ID --json
  backfill audit --gates '{fct_daily_sales: [{removed_rows: 0}]}'""",
    )
    p.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    add_project_options(p)
    add_ledger_option(p)
    p.add_argument("--gates", help="extra gates as YAML/JSON: {model: [gate, ...]}")
    p.set_defaults(func=cmd_audit)


def add_diff_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "diff",
        "diff two tables (files, or tables of the warehouse)",
        description="Diff two tables by key: rows added, removed and changed, and the columns "
        "that changed.",
        examples="""\
Exit 0 when the tables are the same, 1 when they differ.

examples:
  backfill diff old.parquet new.parquet --key order_id
  backfill diff old.csv new.csv --key order_id --partition-by ordered_at --grain day
  backfill diff main.fct_daily_sales audit_ID.fct_daily_sales --key sales_date
      (tables of the warehouse of the project in --project, default the current directory)""",
    )
    p.add_argument("old", help="a .parquet/.csv/.json file, or schema.table in the warehouse")
    p.add_argument("new", help="the same forms as OLD")
    add_project_options(p)
    p.add_argument("--key", required=True, action="append", help="key column (repeatable)")
    p.add_argument("--partition-by", help="date/timestamp column for per-partition breakdown")
    p.add_argument(
        "--grain", default="day", help="partition length for --partition-by (default day)"
    )
    p.add_argument(
        "--tz",
        default="UTC",
        help="time zone the --partition-by partitions are cut in (default UTC)",
    )
    p.set_defaults(func=cmd_diff)


def cmd_audit(args: argparse.Namespace) -> int:
    gates = None
    if args.gates:
        try:
            gates = yaml.safe_load(args.gates)
        except yaml.YAMLError as exc:
            raise InvalidInputError(f"--gates {args.gates!r} is not YAML/JSON: {exc}") from None
    bf = open_backfill(args)
    with busy(f"auditing {bf.id}..."):
        report = bf.audit(gates=gates)
    dump(report.to_dict()) if args.json else write(str(report))
    return EXIT_OK if report.passed else EXIT_FAILED


def _read(con: duckdb.DuckDBPyConnection, spec: str) -> Any:
    """A relation of ``spec``: a file, or ``schema.table`` of the connected warehouse."""
    path = Path(spec)
    if path.suffix.lower() in _FILE_SUFFIXES:
        if not path.exists():
            raise InvalidInputError(f"{spec}: no such file")
        literal = "'" + str(path).replace("'", "''") + "'"
        return con.sql(f"SELECT * FROM {literal}")
    if "." not in spec:
        raise InvalidInputError(
            f"{spec!r}: expected a .parquet/.csv/.json file or "
            "schema.table in the project's warehouse"
        )
    schema, _, table = spec.partition(".")
    try:
        return con.sql(f"SELECT * FROM {quote(schema)}.{quote(table)}")
    except duckdb.Error as exc:  # no such schema or table, or one DuckDB cannot read
        raise InvalidInputError(f"{spec!r}: {exc}") from None


def cmd_diff(args: argparse.Namespace) -> int:
    files = all(Path(s).suffix.lower() in _FILE_SUFFIXES for s in (args.old, args.new))
    if files:
        con = duckdb.connect()
    else:
        settings = open_project(args).settings
        if settings is None:  # only a project built in Python has none; Project.load sets them
            raise InvalidInputError(f"project {args.project}: no warehouse to read tables from")
        engine = settings.engine  # a DuckDB file: engine duckdb, or dbt on dbt-duckdb
        if engine.type not in ("duckdb", "dbt") or not engine.path.is_file():
            what = (
                f"its DuckDB file {engine.path} does not exist"
                if engine.type == "duckdb"
                else f"its warehouse ({engine.type}) is not a DuckDB file"
            )
            raise InvalidInputError(
                f"project {args.project}: diff reads schema.table from a "
                f"DuckDB warehouse and {what}; diff .parquet or .csv "
                "exports of the two tables instead"
            )
        con = duckdb.connect(str(engine.path), read_only=True)
    try:
        options: dict[str, Any] = {}
        if args.partition_by:
            options = dict(partition_by=args.partition_by, grain=args.grain, tz=args.tz)
        result = diff(
            _read(con, args.old),
            _read(con, args.new),
            key=args.key,
            on_duplicate="report",
            **options,
        )
    finally:
        con.close()
    if args.json:
        dump(
            {
                "summary": result.summary.to_dict(),
                "key": result.key,
                "changed_columns": result.changed_columns(),
                "columns": result.columns.to_pylist(),
                "partitions": result.partitions.to_pylist(),
            }
        )
    else:
        write(str(result))
    return EXIT_OK if result.identical else EXIT_FAILED
