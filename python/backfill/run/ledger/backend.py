"""``LedgerBackend``: what runners, orchestrators, audit and publish call on a ledger.

>>> ledger = open_ledger("sqlite:////shared/backfill/ledger.sqlite")   # doctest: +SKIP

Today the only backend is SQLite (:class:`~backfill.ledger.Ledger`): one file that every worker
on ONE machine opens. SQLite's locking is not safe over NFS or other network file systems, so
workers on several machines (Airflow's Celery or Kubernetes executors) need a shared database;
a Postgres backend will implement the same protocol and be opened by ``postgresql://`` URLs.
Until then such URLs raise a clear error instead of silently using a local file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .sqlite import Claim, TaskRow

__all__ = ["LedgerBackend"]


@runtime_checkable
class LedgerBackend(Protocol):
    """The ledger operations the runner, the Airflow integration and ``status`` rely on.

    Every method is atomic on its own; ``claim``/``claim_task`` take a lease that ``renew``
    extends and ``finish`` ends, so two workers never run one task at once. (Audit and publish
    still record their rows through SQLite transactions; a shared backend adds those two writes.)
    """

    def create_backfill(self, record: Mapping[str, Any],
                        tasks: Sequence[Mapping[str, Any]]) -> None: ...

    def backfill(self, backfill_id: str) -> dict[str, Any]: ...

    def set_status(self, backfill_id: str, status: str, *, finished: bool = False) -> None: ...

    def tasks(self, backfill_id: str) -> list[TaskRow]: ...

    def attempts(self, backfill_id: str) -> list[dict[str, Any]]: ...

    def claim(self, backfill_id: str, worker: str, limit: int,
              lease_seconds: float) -> list[Claim]: ...

    def claim_task(self, backfill_id: str, task_id: int, worker: str,
                   lease_seconds: float) -> Claim | TaskRow: ...

    def renew(self, backfill_id: str, worker: str, task_ids: Sequence[int],
              lease_seconds: float) -> None: ...

    def finish(self, claim: Claim, backfill_id: str, worker: str, *, ok: bool, rows: int | None,
               deleted: int | None, fingerprint: str | None, seconds: float, error: str | None,
               retry_at: float | None) -> str: ...

    def live_workers(self, backfill_id: str) -> set[str]: ...

    def audits(self, backfill_id: str) -> list[dict[str, Any]]: ...

    def publications(self, backfill_id: str | None = None) -> list[dict[str, Any]]: ...

    def backfills(self, limit: int = 50) -> list[dict[str, Any]]: ...

    def latest(self) -> str | None: ...

    def reset_failed(self, backfill_id: str) -> int: ...

    def record_audit(self, backfill_id: str, audit_id: str, created_at: str, created_by: str,
                     models: Sequence[Mapping[str, Any]]) -> None: ...

    def record_publication(self, backfill_id: str, publication: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...
