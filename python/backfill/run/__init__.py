"""The run stage: backfills recorded in a ledger and run task by task through an engine."""

from __future__ import annotations

from .backfill import Backfill, CreateOptions
from .executor import TaskExecutor, TaskOutcome
from .history import model_costs
from .ledger import BackfillState, LedgerBackend, TaskState, ledger_for, open_ledger
from .runner import RunOptions
from .status import BackfillStatus, ModelStatus, TaskEvent
from .stop import DEFAULT_GRACE, Stop, on_signals

__all__ = [
    "DEFAULT_GRACE",
    "Backfill",
    "BackfillState",
    "BackfillStatus",
    "CreateOptions",
    "LedgerBackend",
    "ModelStatus",
    "RunOptions",
    "Stop",
    "TaskEvent",
    "TaskExecutor",
    "TaskOutcome",
    "TaskState",
    "ledger_for",
    "model_costs",
    "on_signals",
    "open_ledger",
]
