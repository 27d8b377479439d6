"""``backfill demo``: the shop backfill of our design notes, end to end, in one command.

Builds the shop with the discount bug (the initial build writes the published tables directly),
fixes fct_daily_sales, plans ``fct_daily_sales+`` for 1 Aug - 28 Oct 2026 (downstream models
follow), estimates it from one sample day, runs it concurrently into the audit area, audits it
(revenue about 2% lower on the affected days, months and rolling windows; nothing else changed),
publishes it with a note, prints the changelog and the message consumers receive. ``as_of`` is
fixed, so the output is the same on every machine (except timings, paths and ids).
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .._secrets import mask_url
from ..api import Project
from ..errors import InvalidInputError
from ..examples import shop
from ..run import RunOptions
from ..run.estimate import estimate, format_seconds_fine
from .exit_codes import EXIT_FAILED, EXIT_OK
from .helptext import add_command
from .progress import force_progress, run_with_progress

__all__ = ["DemoOptions", "add_parser", "run_demo"]

AS_OF = "2026-12-01"
SELECT = "fct_daily_sales+"
START, END = "2026-08-01", "2026-10-29"
REASON = "discount bug fixed: from 1 Aug 2026 discounts arrive as discount_pct"
NOTE = (
    "Revenue from 1 Aug 2026 was overstated by about 2% (percentage discounts were "
    "ignored); daily, monthly and 7-day figures are corrected."
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = add_command(
        sub,
        "demo",
        "the shop backfill, end to end (try this first)",
        description="Show the whole flow on an example shop: plan, estimate, run, audit and "
        "publish a backfill.",
        examples="""\
It builds the shop's warehouse with a discount bug, fixes the model, then backfills
fct_daily_sales and what depends on it for 1 Aug - 28 Oct 2026, printing each step.

examples:
  backfill demo
  backfill demo --dir /tmp/shop      keep the shop, to try the other commands on it
  backfill demo --engine postgres --url postgresql://me@localhost/scratch""",
    )
    d.add_argument("--dir", help="where to build the shop (default: a new temporary directory)")
    d.add_argument("--orders-per-day", type=int, default=240, help=argparse.SUPPRESS)
    d.add_argument("--concurrency", type=int, default=8, help="tasks at once (default 8)")
    d.add_argument(
        "--engine",
        choices=("duckdb", "postgres", "spark"),
        default="duckdb",
        help="the warehouse: a DuckDB file in --dir (default), the PostgreSQL "
        "database --url names, or Spark on Apache Iceberg (local[*], an "
        "Iceberg catalog in --dir; needs `make setup`)",
    )
    d.add_argument(
        "--url",
        help="with --engine postgres: postgresql://user@host:port/database "
        "(the demo loads raw.orders and raw.order_items and builds the "
        "shop's tables in --schema, replacing earlier demo runs' ones)",
    )
    d.add_argument(
        "--schema",
        default="shop",
        help="with --engine postgres: the schema of the published tables (default shop)",
    )
    d.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(
        args.dir,
        orders_per_day=args.orders_per_day,
        concurrency=args.concurrency,
        engine=args.engine,
        url=args.url,
        schema=args.schema,
    )


def _create(root: Path, opts: DemoOptions, say: Callable[[str], None]) -> None:
    """The shop's files and raw data (with the bug) in ``root`` and its warehouse."""
    engine, url, schema = opts.engine, opts.url, opts.schema
    if engine in ("duckdb", "spark"):
        if url is not None:
            raise InvalidInputError("--url is for --engine postgres")
        shop.create(root, orders_per_day=opts.orders_per_day)
        if engine == "spark":  # the same raw data, loaded into Iceberg tables
            shop.use_spark(root, conf={"spark.ui.enabled": "false"})
        return
    if not url:
        raise InvalidInputError("--engine postgres needs --url postgresql://user@host/db")
    from ..examples.shop import postgres as shop_pg

    say(f"warehouse: PostgreSQL {mask_url(url)}, published tables in schema {schema}")
    # start_over: the demo's own tables of an earlier run go first
    shop_pg.create(root, url, schema=schema, orders_per_day=opts.orders_per_day, start_over=True)


@dataclass(frozen=True)
class DemoOptions:
    """The demo's warehouse and story: ``engine`` (``duckdb``, ``spark``, or ``postgres`` at
    ``url`` with the published tables in ``schema``), the shop's size, the concurrency, and
    ``span`` (the backfill's days) and ``build`` (the initial build's), which a test may
    shorten."""

    orders_per_day: int = 240
    concurrency: int = 8
    engine: str = "duckdb"
    url: str | None = None
    schema: str = "shop"
    span: tuple[str, str] = (START, END)
    build: tuple[str, str] = ("2026-01-01", "2026-12-01")


def run_demo(
    directory: str | Path | None = None, *, out: TextIO | None = None, **options: Any
) -> int:
    """Runs the demo in ``directory`` (default: a new temporary directory), writing its story to
    ``out`` (default stdout); ``options`` are those of :class:`DemoOptions`. Returns an exit
    code (EXIT_OK when every step succeeded)."""
    opts = DemoOptions(**options)
    concurrency, span = opts.concurrency, opts.span
    w = out or sys.stdout

    def say(text: str = "") -> None:
        w.write(text + "\n")
        w.flush()

    def step(n: int, title: str) -> None:
        say()
        say(f"== {n}. {title}")

    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="backfill-demo-"))
    say(f"backfill demo in {root}")

    step(1, "build the shop, with the discount bug, straight into the published tables")
    began = time.perf_counter()
    _create(root, opts, say)
    project = Project.load(root)
    initial = project.plan("*", *opts.build, as_of=AS_OF, partitions_per_run=31)
    status = project.backfill(initial, reason="initial build", direct=True).run(
        concurrency=concurrency
    )
    if not status.ok:
        say(str(status))
        return EXIT_FAILED
    say(f"{len(project.models)} models, {status.total} tasks, {time.perf_counter() - began:.1f} s")

    step(2, "fix fct_daily_sales")
    model_file = root / "models" / "fct_daily_sales.sql"
    before = model_file.read_text(encoding="utf-8").splitlines()
    shop.fix(root)
    after = model_file.read_text(encoding="utf-8").splitlines()
    for line in difflib.unified_diff(
        before, after, "fct_daily_sales.sql (bug)", "fct_daily_sales.sql (fixed)", n=0, lineterm=""
    ):
        if not line.startswith("@@"):
            say(f"  {line}")
    project = Project.load(root)

    step(3, f"plan {SELECT} {span[0]} .. {span[1]} (end exclusive, as of {AS_OF})")
    plan = project.plan(SELECT, span[0], span[1], as_of=AS_OF, concurrency=concurrency)
    say(plan.describe())

    step(4, "estimate from one sample day per model")
    est = estimate(project, plan, concurrency=concurrency)
    say(str(est))

    step(5, "run into the audit area (readers of the published tables see nothing yet)")
    bf = project.backfill(plan, reason=REASON)
    say(f"backfill {bf.id}: {bf.reason}")
    began = time.perf_counter()
    if (sys.stdout.isatty() and w is sys.stdout) or force_progress():
        status = run_with_progress(bf, RunOptions(concurrency))
    else:
        status = bf.run(concurrency=concurrency)
    say(str(status))
    say(f"took {time.perf_counter() - began:.1f} s (estimated {format_seconds_fine(est.makespan)})")
    if not status.ok:
        return EXIT_FAILED

    step(6, "audit: the audit version against the published one, per partition")
    report = bf.audit()
    say(str(report))
    if not report.passed:
        return EXIT_FAILED

    step(7, "publish, atomically, with a note for consumers")
    pub = bf.publish(note=NOTE)
    say(str(pub))

    step(8, "changelog")
    say(str(project.changelog()))

    step(9, "the message consumers receive (webhook `text` and e-mail; see notify: in README)")
    say(pub.message)
    say()
    if pub.keep_until:
        say(
            f"what it replaced is kept until {pub.keep_until}: to take the publication back, "
            f'backfill rollback {pub.id} --note "why" (with --project, below)'
        )
    say(f"done; the project is in {root} (try: backfill changelog --project {root})")
    return EXIT_OK
