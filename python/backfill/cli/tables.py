"""``backfill partition MODEL``: make a model's existing published table declaratively
partitioned (its ``table_partitions`` in backfill.yml), on an engine that has such tables
(PostgreSQL). A plain table is otherwise left alone: written and published by DELETE + INSERT.

Takes ``--project DIR`` and ``--json``. Exit 0 when the table is partitioned (also when it was
already), 2 for usage or input errors (no such model, no table_partitions, an engine without
partitioned tables, rows without an event time).
"""

from __future__ import annotations

import argparse
import time

from ..engines.registry import engine_for
from .common import add_project_options, busy, dump, open_project, write
from .exit_codes import EXIT_OK
from .helptext import add_command

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "partition",
        "make a model's published table partitioned",
        description="Make a model's published table declaratively partitioned by its "
        "table_partitions grain, copying its rows in one transaction.",
        examples="""\
Writers of the table wait while its rows are copied; readers read the old table until the
swap, and wait from the swap to the commit. Needs table_partitions on the model (backfill.yml)
and a PostgreSQL warehouse; a table partitioned already is left as it is.

examples:
  backfill partition fct_order_lines --project shop/""",
    )
    p.add_argument("model", help="the model whose published table is partitioned")
    add_project_options(p)
    p.set_defaults(func=cmd_partition_table)


def cmd_partition_table(args: argparse.Namespace) -> int:
    project = open_project(args)
    engine = engine_for(project)
    try:
        began = time.perf_counter()
        with busy(f"partitioning the table of {args.model}..."):
            made = engine.partition_table(project, args.model)
        seconds = time.perf_counter() - began
    finally:
        engine.close()
    if args.json:
        dump({"model": args.model, "partitions_made": made, "seconds": round(seconds, 3)})
    elif made:
        write(f"{args.model}: table partitioned into {made} partition(s) in {seconds:.1f} s")
    else:
        write(f"{args.model}: table partitioned already; nothing changed")
    return EXIT_OK
