"""The exit codes of every ``backfill`` command, defined once.

0: the command did what was asked. 1: the work ran and failed (a failed task or gate, a refused
publish, a difference found by ``check`` or ``diff``, a plan or lint with an error finding).
2: usage or input error; then nothing was recorded or changed.
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
