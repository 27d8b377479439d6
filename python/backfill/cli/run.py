"""``backfill run`` and ``backfill status``: run a plan (or resume one), see where it stands.

    backfill run --project DIR --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \
        --reason "discount bug fixed" [--concurrency 8] [--direct] [--json]
    backfill run --resume ID          (or: backfill run ID)
    backfill status [ID] [--json]
    backfill status --list [--json]

Exit codes: 0 every task done, 1 a task failed, 2 usage or input error (nothing is recorded),
3 stopped for now: no window has room (--exit-outside-window) or paused (--exit-when-held),
4 stopped until someone acts: the budget is spent, or the backfill was cancelled,
130 / 143 stopped by SIGINT (Ctrl-C) / SIGTERM: claims stop, running tasks get --grace (default
30s) to finish, then are interrupted (a second Ctrl-C interrupts them at once); nothing is lost:
the backfill is "interrupted" and --resume runs the rest.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from ..api import Backfill, BackfillDraft, Project
from ..errors import InvalidInputError
from ..publish import kept_summary
from ..run import DEFAULT_GRACE, BackfillStatus, RunOptions, Stop, ledger_for, on_signals
from ..windows import parse_duration
from .common import add_batching, add_ledger_option, ledger_from_args
from .exit_codes import EXIT_FAILED, EXIT_LATER, EXIT_OK, EXIT_STOPPED, EXIT_USAGE, exit_for_signal
from .helptext import add_command
from .progress import force_progress, run_with_log_lines, run_with_progress

__all__ = ["add_parsers"]


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = add_command(
        sub,
        "run",
        "run a backfill (or resume one)",
        description="Plan and run a backfill into the audit area (published tables unchanged), "
        "or resume one.",
        examples="""\
examples:
  backfill run --project . --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \\
      --reason "discount bug fixed"
  backfill run ID                  resume: run what is not done (after a crash or a failure)
  backfill run --select "*" --start 2026-01-01 --end 2026-12-01 --direct \\
      --reason "initial build"     a first build, straight into the published tables
  backfill run ID --window "22:00-06:00 Europe/Berlin" --budget 3h

Then `backfill audit` shows what changed and `backfill publish` makes it visible. Several
processes or hosts may run the same backfill (`backfill run ID` on each; a shared --ledger).

exit status: 0 every task done, 1 a task failed, 2 usage or input error (nothing recorded),
3 stopped for now (no run window has room, or paused): run it again later,
4 stopped until someone acts (the budget is spent, or it was cancelled),
130/143 interrupted by Ctrl-C/SIGTERM: nothing is lost, `backfill run ID` runs the rest.""",
    )
    r.add_argument("id", nargs="?", help="a recorded backfill to resume (same as --resume)")
    r.add_argument("--project", default=".", help="project directory (default: current)")
    r.add_argument("--resume", metavar="ID", help="resume backfill ID: run what is not done")
    r.add_argument("--select", help='dbt selector, e.g. "fct_daily_sales+"')
    r.add_argument("--exclude", help="dbt selector of models to leave out")
    r.add_argument("--start", help="period start (ISO date or date-time)")
    r.add_argument("--end", help="period end, exclusive")
    r.add_argument("--tz", help="time zone of naive --start/--end (default UTC)")
    r.add_argument("--as-of", help="only partitions ended by then (default: now)")
    r.add_argument("--reason", help="why the past changes (recorded, shown to consumers)")
    r.add_argument(
        "--direct",
        action="store_true",
        help="write the published tables directly (initial builds), no audit area",
    )
    add_batching(r)
    r.add_argument(
        "--concurrency",
        type=int,
        default=4,
        metavar="N",
        help="tasks at once in this process (default 4)",
    )
    r.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        metavar="N",
        help="attempts per task for transient failures (default 3)",
    )
    r.add_argument(
        "--backoff",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="wait before the second attempt, doubling after (default 1)",
    )
    r.add_argument(
        "--lease",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="task lease; another worker takes over a task when it ends (default 60)",
    )
    r.add_argument(
        "--grace",
        default=f"{DEFAULT_GRACE:g}s",
        metavar="DURATION",
        help="on SIGINT/SIGTERM, how long running tasks may take to finish before "
        f"they are interrupted (default {DEFAULT_GRACE:g}s; 0: at once)",
    )
    r.add_argument(
        "--include-in-progress",
        action="store_true",
        default=None,
        help="also rebuild the partitions still in progress at --as-of (this month, "
        "this year; default for dbt projects)",
    )
    r.add_argument(
        "--allow-overlap",
        metavar="REASON",
        help="record the backfill although an open one writes the same partitions "
        "(the reason is recorded)",
    )
    r.add_argument(
        "--accept-changed-sql",
        metavar="REASON",
        help="resume although a model's SQL changed since the backfill was planned "
        "(the rest runs the current SQL; the reason is recorded)",
    )
    r.add_argument(
        "--no-lint",
        action="store_true",
        help="run even when the lint finds errors in a planned model",
    )
    r.add_argument("--json", action="store_true", help="machine-readable output, no progress")
    r.add_argument(
        "--window",
        action="append",
        metavar="WINDOW",
        help="claim tasks only inside it, e.g. '22:00-06:00 Europe/Berlin' "
        "(repeat for several; default: backfill.yml's window)",
    )
    r.add_argument(
        "--exit-outside-window",
        action="store_true",
        help="exit (code 3) instead of waiting when no window has room now (cron, Airflow)",
    )
    r.add_argument(
        "--exit-when-held",
        action="store_true",
        help="exit (code 3) instead of waiting while the backfill is paused",
    )
    r.add_argument(
        "--budget",
        metavar="DURATION",
        help="engine time the backfill may use, e.g. 3h (estimated first)",
    )
    r.add_argument(
        "--force",
        metavar="REASON",
        help="run although the estimate exceeds --budget (the reason is recorded)",
    )
    add_ledger_option(r)
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.set_defaults(func=cmd_run)

    s = add_command(
        sub,
        "status",
        "show a backfill's progress",
        description="Show a backfill's progress: tasks done, running, failed and pending per "
        "model; why tasks failed.",
        examples="""\
examples:
  backfill status                  the latest backfill
  backfill status ID --json
  backfill status --list           recent backfills""",
    )
    s.add_argument("id", nargs="?", help="backfill id (default: the latest)")
    s.add_argument("--project", default=".", help="project directory (default: current)")
    s.add_argument("--list", action="store_true", help="list recent backfills instead")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    add_ledger_option(s)
    s.set_defaults(func=cmd_status)


def _usage(message: str) -> int:
    sys.stderr.write(f"backfill run: error: {message}\n")
    return EXIT_USAGE


def _grace(text: str) -> float:
    """Seconds of ``--grace``: a duration (``30s``, ``2m``) or 0."""
    try:
        if float(text) == 0:
            return 0.0
    except ValueError:
        pass
    return parse_duration(text, "--grace")


def cmd_run(args: argparse.Namespace) -> int:
    resume = args.resume or args.id
    grace = _grace(args.grace)  # a bad value is refused before anything is recorded
    if args.resume and args.id and args.resume != args.id:
        return _usage(f"two backfill ids given: {args.id} and --resume {args.resume}")
    fields = ("select", "start", "end", "reason")
    if resume and (given := [f"--{n}" for n in fields if getattr(args, n)]):
        return _usage(
            f"{', '.join(given)} cannot change a recorded backfill; "
            f"resume with only --resume {resume}"
        )
    if not resume and (missing := [f"--{n}" for n in fields if not getattr(args, n)]):
        return _usage(f"missing {', '.join(missing)} (or --resume ID to resume a backfill)")
    bf = _resume(args, resume) if resume else _plan_and_record(args)
    if isinstance(bf, int):  # refused before anything was recorded
        return bf
    if not args.json:
        target = "published tables" if bf.mode == "direct" else f"audit area of {bf.id}"
        sys.stdout.write(f"backfill {bf.id}: {bf.reason!r} -> {target}\n")
    stop = Stop()
    options = RunOptions(
        concurrency=args.concurrency,
        max_attempts=args.max_attempts,
        backoff=args.backoff,
        lease_seconds=args.lease,
        windows=args.window if resume else None,
        exit_outside_window=args.exit_outside_window,
        exit_when_held=args.exit_when_held,
        stop=stop,
        grace=grace,
    )
    with on_signals(stop):  # SIGINT/SIGTERM: stop claiming, let tasks finish, then interrupt
        if args.json or args.no_progress:
            final = bf.run(options)
        elif not sys.stdout.isatty() and not force_progress():
            final = run_with_log_lines(bf, options)  # CI and scheduler logs: a line per 10%
        else:
            final = run_with_progress(bf, options)
    _print_status(final, args.json)
    return _exit_code(final, stop, bf.id)


def _resume(args: argparse.Namespace, backfill_id: str) -> Backfill:
    bf = Backfill.resume(
        backfill_id,
        project=Path(args.project),
        ledger=ledger_from_args(args),
        accept_changed_sql=args.accept_changed_sql,
    )
    if args.budget:  # a new budget for what is left; spent engine time counts against it
        bf.set_budget(args.budget)
    return bf


def _plan_and_record(args: argparse.Namespace) -> Backfill | int:
    """Plans, lints and (with --budget) estimates, printing each, then records the backfill;
    an exit code when the lint refuses it."""
    project = Project.load(args.project)
    plan = project.plan(
        args.select,
        args.start,
        args.end,
        exclude=args.exclude,
        tz=args.tz,
        as_of=args.as_of,
        partitions_per_run=args.partitions_per_run,
        concurrency=args.concurrency,
        min_task_seconds=args.min_task,
        include_in_progress=args.include_in_progress,
    )
    if not args.json:
        sys.stdout.write(f"plan: {plan}\n")
        for finding in plan.findings:
            sys.stdout.write(f"  {finding}\n")
    draft = BackfillDraft(project, plan)
    for result in draft.lint:
        for lint_finding in result.findings:
            sys.stderr.write(f"{lint_finding}\n")
    if draft.lint_errors and not args.no_lint:
        return _usage(
            f"the lint found {draft.lint_errors} error(s) in planned models (above): a "
            "backfill of them would not be reproducible; fix them, suppress a "
            "finding in the SQL with a reason, or pass --no-lint"
        )
    if args.budget:
        parse_duration(args.budget)  # a bad budget is refused before the sample run
        report = draft.estimate(concurrency=args.concurrency)
        if not args.json:
            sys.stdout.write(f"estimate: {report}\n")
    return draft.record(
        reason=args.reason,
        direct=args.direct,
        lint=not args.no_lint,
        ledger=ledger_from_args(args),
        windows=args.window,
        budget=args.budget,
        force=args.force,
        allow_overlap=args.allow_overlap,
    )


def _exit_code(final: BackfillStatus, stop: Stop, backfill_id: str) -> int:
    """The exit code of a run that ended as ``final`` (see the module doc), saying on stderr
    what to do next when it did not finish."""
    if stop.requested and not final.finished:
        sys.stderr.write(
            f"backfill run: stopped by {stop.describe()}; finished tasks are "
            "recorded, interrupted ones committed nothing. Resume with: backfill "
            f"run --resume {backfill_id}\n"
        )
        _exit_now_if_tasks_linger(backfill_id, exit_for_signal(stop.signal))
        return exit_for_signal(stop.signal)
    if final.ok:
        return EXIT_OK
    if final.failed_tasks:
        sys.stderr.write(
            f"backfill run: {len(final.failed_tasks)} task(s) failed (above); once "
            f"the cause is fixed, run them again with: backfill run --resume "
            f"{final.id}\n"
        )
    if final.held in ("window", "paused"):
        return EXIT_LATER
    if final.held in ("budget", "cancelled"):
        return EXIT_STOPPED
    return EXIT_FAILED


def _exit_now_if_tasks_linger(backfill_id: str, code: int) -> None:
    """Ends the process at once when a task the engine could not interrupt still runs (Python
    would wait for its thread at exit): its transaction is rolled back by the database and its
    lease, held by a process now gone, is dropped at the next claim."""
    if any(
        t.is_alive() and t.name.startswith(f"backfill-{backfill_id}") for t in threading.enumerate()
    ):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _print_status(
    status: BackfillStatus, as_json: bool, versions: list[dict[str, Any]] | None = None
) -> None:
    if as_json:
        sys.stdout.write(
            json.dumps({**status.to_dict(), "publications": versions or []}, indent=2) + "\n"
        )
        return
    sys.stdout.write(str(status) + "\n")
    for v in versions or []:
        sys.stdout.write(
            f"  {v['kind']} {v['publication_id']}: {v['rollback']}"
            f" ({v['rows_kept']} row(s) kept apart)\n"
        )


def cmd_status(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    bf = Backfill.open(args.id, project=Path(args.project), ledger=ledger_from_args(args))
    status = bf.status()
    now = dt.datetime.now(dt.timezone.utc)
    versions = [dict(kept_summary(v, now)) for v in bf.ledger.kept_versions(bf.id)]
    _print_status(status, args.json, versions)
    return EXIT_FAILED if status.status == "failed" else EXIT_OK


def _list(args: argparse.Namespace) -> int:
    project = Project.load(args.project)
    try:
        rows = (ledger_from_args(args) or ledger_for(project, must_exist=True)).backfills()
    except InvalidInputError:  # no ledger: nothing recorded yet
        rows = []
    keys = (
        "id",
        "status",
        "mode",
        "selection",
        "start",
        "end",
        "reason",
        "created_by",
        "created_at",
    )
    if args.json:
        sys.stdout.write(
            json.dumps([{k: getattr(r, k) for k in keys} for r in rows], indent=2) + "\n"
        )
        return EXIT_OK
    for r in rows:
        sys.stdout.write(
            f"{r.id}  {r.status.value:<9} {r.mode:<6} {r.selection} "
            f"{r.start[:10]}..{r.end[:10]}  {r.reason!r} "
            f"({r.created_by}, {r.created_at[:19]})\n"
        )
    if not rows:
        sys.stdout.write("no backfills recorded\n")
    return EXIT_OK
