"""The exit codes of every ``backfill`` command, defined once.

0: the command did what was asked. 1: the work ran and failed (a failed task or gate, a refused
publish, a difference found by ``check`` or ``diff``, a plan or lint with an error finding).
2: usage or input error; then nothing was recorded or changed.
3 (``run``): the runner stopped before the end and running it later continues: no window has
room now (``--exit-outside-window``) or the backfill is paused (``--exit-when-held``). For cron
and orchestrators: not a failure, try again later.
4 (``run``): the runner stopped before the end and running it again does nothing until someone
acts: the budget has no room for the next task (raise it: ``--budget``), or it was cancelled.
130 / 143 (``run``): stopped by SIGINT (Ctrl-C) / SIGTERM before the end, as shells and
orchestrators expect of a process a signal ended (128 + the signal's number). The backfill is
``interrupted``; ``backfill run --resume ID`` runs the rest.
"""

from __future__ import annotations

import signal
from typing import Final

__all__ = [
    "EXIT_FAILED",
    "EXIT_LATER",
    "EXIT_OK",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_STOPPED",
    "EXIT_USAGE",
    "exit_for_signal",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_LATER: Final = 3
EXIT_STOPPED: Final = 4
EXIT_SIGINT: Final = 128 + signal.SIGINT  # 130
EXIT_SIGTERM: Final = 128 + signal.SIGTERM  # 143


def exit_for_signal(signum: int | None) -> int:
    """The exit code of a run a signal stopped: 128 + its number (EXIT_FAILED without one)."""
    return EXIT_FAILED if signum is None else 128 + int(signum)
