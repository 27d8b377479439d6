"""The exit codes of every ``backfill`` command, defined once.

0: the command did what was asked. 1: the work ran and failed (a failed task or gate, a refused
publish, a difference found by ``check`` or ``diff``, a plan or lint with an error finding).
2: usage or input error; then nothing was recorded or changed.
3 (``run``): the runner stopped before the end and running it later continues: no window has
room now (``--exit-outside-window``) or the backfill is paused (``--exit-when-held``). For cron
and orchestrators: not a failure, try again later.
4 (``run``): the runner stopped before the end and running it again does nothing until someone
acts: the budget has no room for the next task (raise it: ``--budget``), or it was cancelled.
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXIT_FAILED", "EXIT_LATER", "EXIT_OK", "EXIT_STOPPED", "EXIT_USAGE"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_LATER: Final = 3
EXIT_STOPPED: Final = 4
