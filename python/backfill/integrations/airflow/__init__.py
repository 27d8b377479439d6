"""Backfills as Airflow 3 tasks: planned once, one mapped task instance per backfill task,
retried by Airflow, audited and published by downstream tasks.

:mod:`.tasks` holds the plain functions (no Airflow needed); :mod:`.dag` builds the DAG from them
(Airflow is imported only when a DAG is built).
"""

from __future__ import annotations

from .dag import backfill_dag
from .tasks import (
    GateFailedError,
    audit,
    backfill_id_for,
    plan_backfill,
    publish,
    run_task,
    task_ids,
    task_label,
)

__all__ = [
    "GateFailedError",
    "audit",
    "backfill_dag",
    "backfill_id_for",
    "plan_backfill",
    "publish",
    "run_task",
    "task_ids",
    "task_label",
]
