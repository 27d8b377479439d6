"""Where the ledger lives: ``LedgerBackend`` (what runners and orchestrators call) and
``open_ledger(url)``.

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

from .errors import InvalidInputError
from .ledger import Claim, Ledger, TaskRow

__all__ = ["LedgerBackend", "open_ledger"]


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


def _conforms(ledger: Ledger) -> LedgerBackend:
    return ledger  # mypy checks here that the SQLite ledger implements the whole protocol


def open_ledger(url: str | Path) -> Ledger:
    """The ledger at ``url``: ``sqlite:///relative/path``, ``sqlite:////absolute/path`` (as in
    SQLAlchemy URLs) or a plain file path."""
    if isinstance(url, Path):
        return Ledger(url)
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError(f"ledger URL {url!r}: expected 'sqlite:///path' or a file path")
    scheme, sep, rest = url.partition("://")
    if not sep:
        return Ledger(Path(url))
    if scheme != "sqlite":
        raise InvalidInputError(
            f"ledger URL {url!r}: only sqlite:///path ledgers exist so far (one machine); "
            f"a shared {scheme!r} ledger for workers on several machines is not built yet")
    if not rest.startswith("/") or rest == "/":
        raise InvalidInputError(f"ledger URL {url!r}: expected sqlite:///relative/path or "
                                "sqlite:////absolute/path (three slashes, then the path)")
    return Ledger(Path(rest[1:]))
