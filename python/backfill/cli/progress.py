"""How a running backfill shows its progress: rich progress bars on a terminal, a log line per
10% of the tasks elsewhere (CI and scheduler logs). Used by ``backfill run`` and ``backfill demo``;
and how ``backfill diff`` of two warehouses shows where it is (:func:`diff_progress`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from ..api import Backfill
from ..audit.crossdiff import DiffProgress
from ..run import BackfillStatus, RunOptions, TaskEvent

__all__ = ["diff_progress", "force_progress", "run_with_log_lines", "run_with_progress"]


def force_progress() -> bool:
    """``BACKFILL_PROGRESS=1``: progress bars even when stdout is not a terminal (tests, demos)."""
    return os.environ.get("BACKFILL_PROGRESS") == "1"


def run_with_progress(bf: Backfill, options: RunOptions) -> BackfillStatus:
    """Runs ``bf`` with ``options`` under a bar per model."""
    # rich.progress is imported here, not at the top: only a terminal run needs it, and it is
    # the slowest import of the command line.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    start = bf.status()
    console = Console(file=sys.stdout, force_terminal=force_progress() or None)
    lock = threading.Lock()
    with Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as progress:
        overall = progress.add_task("all tasks", total=start.total, completed=start.done, note="")
        bars = {
            m.model: progress.add_task(m.model, total=m.total, completed=m.done, note="")
            for m in start.models
        }
        failed: dict[str, int] = {}

        def on_event(e: TaskEvent) -> None:
            with lock:
                if e.kind == "done":
                    progress.advance(bars[e.model])
                    progress.advance(overall)
                elif e.kind == "failed":
                    failed[e.model] = failed.get(e.model, 0) + 1
                    progress.update(bars[e.model], note=f"[red]{failed[e.model]} failed")
                elif e.kind == "retry":
                    progress.update(bars[e.model], note=f"[yellow]retrying {e.label}")

        return bf.run(options, on_event=on_event)


def run_with_log_lines(bf: Backfill, options: RunOptions) -> BackfillStatus:
    """Runs ``bf`` with ``options``, writing failures and a line per 10% of the tasks done."""
    start = bf.status()
    total, done = start.total, start.done
    began = time.monotonic()
    lock = threading.Lock()
    step = max(1, total // 10)

    def on_event(e: TaskEvent) -> None:
        nonlocal done
        with lock:
            if e.kind == "failed":
                sys.stdout.write(f"  failed: {e.model} {e.label}: {e.error}\n")
            if e.kind != "done":
                return
            done += 1
            if done % step == 0 or done == total:
                elapsed = time.monotonic() - began
                sys.stdout.write(f"  {done}/{total} tasks done, {elapsed:.1f} s\n")
                sys.stdout.flush()

    return bf.run(options, on_event=on_event)


@contextlib.contextmanager
def diff_progress(title: str, forced: bool) -> Iterator[Callable[[DiffProgress], None] | None]:
    """A callback for :func:`backfill.diff_tables` that shows on stderr the segments and key
    ranges checked and the rows streamed: a spinner's line on a terminal, a line per step
    elsewhere with ``forced`` (``--progress``) or ``BACKFILL_PROGRESS=1``; None otherwise."""
    terminal = sys.stderr.isatty()
    if not (terminal or forced or force_progress()):
        yield None
        return
    began = time.monotonic()

    def text(p: DiffProgress) -> str:
        where = {
            "fingerprints": "segments fingerprinted",
            "bisection": f"key ranges, level {p.level}",
            "transfer": "rows streamed",
            "diff": "diffing",
            "done": "done",
        }.get(p.stage, p.stage)
        return (
            f"{title}: {where}; {p.checked:,} checked on each side, {p.differing:,} differing; "
            f"{p.rows_streamed:,} rows streamed; {time.monotonic() - began:.1f} s"
        )

    if not terminal:

        def line(p: DiffProgress) -> None:
            sys.stderr.write(text(p) + "\n")
            sys.stderr.flush()

        yield line
        return
    from rich.console import Console  # only a terminal needs it (a slow import)

    with Console(stderr=True).status(f"{title}...") as status:
        yield lambda p: status.update(text(p))
