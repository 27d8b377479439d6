"""``backfill audit`` and ``backfill diff``: what a backfill changes, what two tables differ in.

    backfill audit [ID] [--gates '{fct_daily_sales: [{removed_rows: 0}]}']
    backfill diff OLD NEW --key K [--partition-by C --grain day --tz UTC]

A table ``schema.table`` is read through the project's engine (any engine: DuckDB, Postgres,
Spark), as an Arrow stream; a file through an in-memory DuckDB.

Both take ``--project DIR`` and ``--json``. Exit 1 when a gate failed (``audit``) or the tables
differ (``diff``); 2 for usage or input errors.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import duckdb
import yaml  # type: ignore[import-untyped]

from .._secrets import mask_url
from ..audit.bisection import BisectionOptions
from ..audit.diff import diff
from ..engines import Engine, open_engine
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
from .progress import diff_progress

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

--against compares what the backfill wrote with a table elsewhere instead of the
published version (a migration's old system): rows of the backfilled partitions only,
fingerprinted in each warehouse, the differing partitions read and diffed. Only --gates
are checked; exit 0 when every compared model is identical (and the gates pass), 1 when
not. It is not recorded: publish still needs the audit against the published version.

examples:
  backfill audit                   the latest backfill
  backfill audit ID --json
  backfill audit --gates '{fct_daily_sales: [{removed_rows: 0}]}'
  backfill audit --select fct_daily_sales \
      --against postgresql://me@old-db/shop#public.fct_daily_sales
  backfill audit --against fct_daily_sales=postgresql://me@old-db/shop#public.fct_daily_sales \
      --against fct_monthly_sales=duckdb:///old/shop.duckdb#main.fct_monthly_sales""",
    )
    p.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    add_project_options(p)
    add_ledger_option(p)
    p.add_argument("--gates", help="extra gates as YAML/JSON: {model: [gate, ...]}")
    p.add_argument(
        "--against",
        action="append",
        metavar="[MODEL=]LOCATION",
        help="compare with this table instead of the published version: "
        "duckdb:///FILE#schema.table, postgresql://...#schema.table, a Parquet file or "
        "folder; MODEL= says which model (repeatable), else --select names it",
    )
    p.add_argument("--select", metavar="MODEL", help="with --against LOCATION: the model compared")
    p.add_argument(
        "--key",
        action="append",
        help="with --against, one model: the key columns rows match on (repeatable; default "
        "the model's unique_key, else its first key candidate)",
    )
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
      (tables of the warehouse of the project in --project, default the current directory)
  backfill diff postgresql://me@db/shop#public.fct_daily_sales \
      duckdb:///data/shop.duckdb#main.fct_daily_sales --key sales_date \
      --partition-by sales_date --grain month
      (two warehouses: each fingerprints its partitions itself, only those that differ are
      read; a side may also be a Parquet file or folder)
  backfill diff --project shop_spark fct_daily_sales \
      duckdb:///data/shop.duckdb#main.fct_daily_sales --key sales_date
      (beside a location, a model or schema.table of the project's warehouse, through its
      engine: Spark reads one Iceberg snapshot; iceberg:///WAREHOUSE#schema.table names a
      table of an Iceberg folder catalog without a project)""",
    )
    p.add_argument(
        "old",
        help="a .parquet/.csv/.json file, schema.table (or, beside a location, a model) in the "
        "project's warehouse, or a location: duckdb:///FILE#schema.table, "
        "postgresql://...#schema.table, iceberg:///WAREHOUSE#schema.table",
    )
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
    p.add_argument(
        "--columns",
        action="append",
        help="with locations: compare only these columns besides the key (repeatable; "
        "default: the columns both have)",
    )
    p.add_argument("--where", help="with locations: a filter both sides apply, in their own SQL")
    p.add_argument(
        "--bisection-threshold",
        type=int,
        default=BisectionOptions.threshold,
        metavar="ROWS",
        help="with locations: a differing segment or key range of at most ROWS rows is "
        f"streamed, a larger one cut into key ranges (default {BisectionOptions.threshold:,})",
    )
    p.add_argument(
        "--bisection-factor",
        type=int,
        default=BisectionOptions.factor,
        metavar="N",
        help=f"with locations: key ranges per cut (default {BisectionOptions.factor})",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="with locations: segments checked and rows streamed on stderr even when it is "
        "not a terminal",
    )
    p.set_defaults(func=cmd_diff)


def cmd_audit(args: argparse.Namespace) -> int:
    gates = None
    if args.gates:
        try:
            gates = yaml.safe_load(args.gates)
        except yaml.YAMLError as exc:
            raise InvalidInputError(f"--gates {args.gates!r} is not YAML/JSON: {exc}") from None
    if not args.against and (args.select or args.key):
        raise InvalidInputError("--select and --key apply with --against")
    bf = open_backfill(args)
    if args.against:
        against = _against(args.against, args.select, set(bf.project.models))
        shown = ", ".join(f"{m} with {mask_url(loc)}" for m, loc in against.items()) or "?"
        with busy(f"auditing {bf.id}: {shown}..."):
            report = bf.audit(gates=gates, against=against or args.against[0], key=args.key)
        dump(report.to_dict()) if args.json else write(str(report))
        return EXIT_OK if report.passed and report.identical else EXIT_FAILED
    with busy(f"auditing {bf.id}..."):
        report = bf.audit(gates=gates)
    dump(report.to_dict()) if args.json else write(str(report))
    return EXIT_OK if report.passed else EXIT_FAILED


def _against(specs: list[str], select: str | None, models: set[str]) -> dict[str, str]:
    """model -> location of ``--against [MODEL=]LOCATION`` (repeated) and ``--select MODEL``;
    empty for one bare location without --select (the backfill must then have rebuilt one
    model). ``MODEL=`` is read as a model only when it names one of the project (a Parquet
    folder may hold a ``=``)."""
    out: dict[str, str] = {}
    bare = []
    for spec in specs:
        head, eq, rest = spec.partition("=")
        if eq and head in models:
            if head in out:
                raise InvalidInputError(f"--against names {head} twice")
            out[head] = rest
        else:
            bare.append(spec)
    if select is not None and select not in models:
        raise InvalidInputError(
            f"--select {select!r}: expected one model of the project ({', '.join(sorted(models))})"
        )
    if len(bare) > 1 or (bare and out):
        raise InvalidInputError(
            "--against LOCATION without MODEL= is one table for one model: with several, "
            "write --against MODEL=LOCATION for each"
        )
    if bare and select is not None:
        out[select] = bare[0]
    elif select is not None and select not in out:
        raise InvalidInputError(f"--select {select}: --against names no table for it")
    return out


def _is_file(spec: str) -> bool:
    return Path(spec).suffix.lower() in _FILE_SUFFIXES


def _read(con: duckdb.DuckDBPyConnection, spec: str) -> Any:
    """The rows of the file ``spec``."""
    path = Path(spec)
    if not path.exists():
        raise InvalidInputError(f"{spec}: no such file")
    literal = "'" + str(path).replace("'", "''") + "'"
    return con.sql(f"SELECT * FROM {literal}")


def _table(spec: str) -> tuple[str, str]:
    if "." not in spec:
        raise InvalidInputError(
            f"{spec!r}: expected a .parquet/.csv/.json file or "
            "schema.table in the project's warehouse"
        )
    schema, _, table = spec.partition(".")
    return schema, table


def _warehouse(args: argparse.Namespace) -> Engine:
    settings = open_project(args).settings
    if settings is None:  # only a project built in Python has none; Project.load sets them
        raise InvalidInputError(f"project {args.project}: no warehouse to read tables from")
    return open_engine(settings.engine)


def _is_location(spec: str) -> bool:
    return "://" in spec


def _is_model(spec: str) -> bool:
    """A model of the project (a name: no file suffix, no schema, no folder)."""
    return not _is_file(spec) and "." not in spec and "/" not in spec


def cmd_diff(args: argparse.Namespace) -> int:
    """Diffs two files, or tables of the project's warehouse read through its engine, or
    tables of two warehouses (locations: :func:`backfill.diff_tables`)."""
    if any(_is_location(s) or _is_model(s) for s in (args.old, args.new)):
        return _diff_locations(args)
    if args.columns or args.where:
        raise InvalidInputError(
            "--columns and --where apply to locations (duckdb:///FILE#schema.table, "
            "postgresql://...#schema.table); got two tables of one warehouse or files"
        )
    for spec in (args.old, args.new):
        if not _is_file(spec):
            _table(spec)
    engine = None if all(_is_file(s) for s in (args.old, args.new)) else _warehouse(args)
    con = duckdb.connect()
    try:
        with contextlib.ExitStack() as stack:
            sides = [
                _read(con, spec)
                if _is_file(spec)
                else stack.enter_context(engine.table_rows(*_table(spec)))  # type: ignore[union-attr]
                for spec in (args.old, args.new)
            ]
            result = diff(
                sides[0], sides[1], key=args.key, on_duplicate="report", **_partition_options(args)
            )
    finally:
        con.close()
        if engine is not None:
            engine.close()
    if args.json:
        dump(_diff_json(result))
    else:
        write(str(result))
    return EXIT_OK if result.identical else EXIT_FAILED


def _diff_json(result: Any) -> dict[str, Any]:
    """What ``backfill diff --json`` prints of a DiffResult."""
    return {
        "summary": result.summary.to_dict(),
        "key": result.key,
        "changed_columns": result.changed_columns(),
        "columns": result.columns.to_pylist(),
        "partitions": result.partitions.to_pylist(),
    }


def _partition_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--partition-by`` with its ``--grain`` and ``--tz`` (nothing without it)."""
    if not args.partition_by:
        return {}
    return {"partition_by": args.partition_by, "grain": args.grain, "tz": args.tz}


def _diff_locations(args: argparse.Namespace) -> int:
    """``backfill diff`` of two warehouses: each side fingerprints its partitions in its own
    engine and only the partitions that differ are streamed (:func:`backfill.diff_tables`)."""
    from ..audit.crossdiff import diff_tables

    with diff_progress(
        f"comparing {mask_url(args.old)} with {mask_url(args.new)}", args.progress
    ) as progress:
        result = diff_tables(
            args.old,
            args.new,
            args.key,
            columns=args.columns,
            where=args.where,
            project=args.project,  # for a side that is a model (or schema.table) of it
            bisection_threshold=args.bisection_threshold,
            bisection_factor=args.bisection_factor,
            progress=progress,
            **_partition_options(args),
        )
    pushdown = {
        "segments": len(result.segments),
        "levels": [dataclasses.asdict(lv) for lv in result.levels],
        "streamed": result.streamed,
        "streamed_ranges": len(result.streamed_ranges),
        "streamed_rows": list(result.streamed_rows),
        "snapshots": result.snapshots,
        "column_types": [dataclasses.asdict(c) for c in result.column_types],
        "seconds": {k: round(v, 3) for k, v in result.timings.items()},
    }
    if args.json:
        dump({**_diff_json(result), **pushdown})
    else:
        write(str(result))
        write(
            f"{len(result.segments)} segment(s) fingerprinted on each side, "
            f"{len(result.streamed)} streamed (differing); read as: "
            + "; ".join(f"{side}: {how}" for side, how in result.snapshots.items())
        )
        for c in result.column_types:
            how = f"compared as {c.compared_as}" if c.compared_as else "not compared"
            write(f"column {c.column}: {c.type_a} vs {c.type_b}, {how} ({c.note})")
    return EXIT_OK if result.identical else EXIT_FAILED
