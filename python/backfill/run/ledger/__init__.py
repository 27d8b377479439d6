"""The ledger: the state of every backfill, task, attempt, lease, audit and publication. It owns
the lifecycle: every state change goes through it, checked against one table of transitions.

What is where:

* :mod:`.states` -- the states of backfills, tasks and attempts (str enums) and the allowed
  transitions; :class:`IllegalTransitionError` for any other.
* :mod:`.records` -- what any backend hands out and raises: typed records
  (:class:`BackfillRecord`, :class:`TaskRow`, :class:`Claim`, :class:`AttemptRecord`,
  :class:`AuditRecord`, :class:`PublicationRecord`, :class:`KeptVersion`: what a publication
  or rollback kept of the version it replaced...), :class:`LedgerError`,
  :class:`TaskBusyError`, :class:`BackfillExistsError`, worker ids and stamps, the checks of
  what callers pass in.
* :mod:`.backend` -- :class:`LedgerBackend`, the protocol everything else calls, with the
  guarantees (atomic methods, leases, exactly-once) every backend gives.
* :mod:`.schema` -- the tables and the one list of migrations, as data rendered per backend.
* :mod:`.sql` -- :class:`~.sql.SqlLedger`, every operation written once in SQL.
* :mod:`.sqlite` -- :class:`SqliteLedger`, the SQLite backend (one file, one machine): its
  connections, ``BEGIN IMMEDIATE``, this process's clock. ``Ledger`` is its former name, kept
  as an alias because ``backfill.Ledger`` is public API.
* :mod:`.postgres` -- :class:`~.postgres.PostgresLedger`, the Postgres backend (one database,
  workers on many hosts): ``SKIP LOCKED`` claims, database-clock leases, commit-landed
  detection; :mod:`.postgres_sql` its own statements, :mod:`.postgres_fast` the prepared finish.
  Imported on first use (psycopg is an optional extra).
* here -- :func:`open_ledger` opens a ledger by URL, :func:`ledger_for` the one of a project.

Nothing outside this package touches ledger SQL or ``sqlite3``. A new backend implements
:class:`LedgerBackend` and passes ``tests/python/conformance/test_ledger.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..._secrets import mask_url
from ...errors import InvalidInputError
from .backend import FinishOutcome, LedgerBackend
from .overlap import Overlap, OverlapError
from .records import (
    AttemptRecord,
    AuditRecord,
    BackfillCancelledError,
    BackfillExistsError,
    BackfillHeldError,
    BackfillPausedError,
    BackfillRecord,
    Claim,
    CostMeasure,
    KeptVersion,
    LedgerError,
    OffsetReset,
    PublicationRecord,
    TaskBusyError,
    TaskEnd,
    TaskRow,
    new_worker_id,
    utcnow,
)
from .schema import SCHEMA_VERSION
from .sqlite import Ledger, SqliteLedger
from .states import AttemptState, BackfillState, IllegalTransitionError, TaskState

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project
    from .postgres import PostgresLedger

_SHARED_SCHEMES = ("postgresql", "postgres")

__all__ = [
    "SCHEMA_VERSION",
    "AttemptRecord",
    "AttemptState",
    "AuditRecord",
    "BackfillCancelledError",
    "BackfillExistsError",
    "BackfillHeldError",
    "BackfillPausedError",
    "BackfillRecord",
    "BackfillState",
    "Claim",
    "CostMeasure",
    "FinishOutcome",
    "IllegalTransitionError",
    "KeptVersion",
    "Ledger",
    "LedgerBackend",
    "LedgerError",
    "OffsetReset",
    "Overlap",
    "OverlapError",
    "PublicationRecord",
    "SqliteLedger",
    "TaskBusyError",
    "TaskEnd",
    "TaskRow",
    "TaskState",
    "ledger_for",
    "new_worker_id",
    "open_ledger",
    "utcnow",
]


def _conforms(ledger: SqliteLedger, shared: PostgresLedger) -> tuple[LedgerBackend, LedgerBackend]:
    return ledger, shared  # mypy checks here that both backends implement the whole protocol


def ledger_for(project: Project, *, must_exist: bool = False) -> LedgerBackend:
    """The ledger of ``project`` (in its state directory). ``must_exist``: refuse to create one
    (looking up backfills of a project that never recorded any)."""
    if project.settings is None:
        raise InvalidInputError(
            f"{project!r} has no state directory: load it from a project "
            "directory (Project.load) or pass ledger="
        )
    if project.settings.ledger_url is not None:  # backfill.yml: state: postgresql://...
        return open_ledger(project.settings.ledger_url)
    path = SqliteLedger.for_project_path(project.settings.state_dir)
    if must_exist and not path.exists():
        raise InvalidInputError(
            f"no backfills recorded for project {project.name!r} (no ledger at {path})"
        )
    return SqliteLedger(path)


def open_ledger(url: str | Path) -> LedgerBackend:
    """The ledger at ``url``: ``sqlite:///relative/path``, ``sqlite:////absolute/path`` (as in
    SQLAlchemy URLs), a plain file path, or ``postgresql://user[:password]@host[:port]/db``
    (also ``postgres://``; ``?schema=name`` for the ledger's schema, default
    ``backfill_ledger``) for a ledger that workers on many hosts share."""
    if isinstance(url, Path):
        return SqliteLedger(url)
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError(
            f"ledger URL {url!r}: expected 'sqlite:///path', "
            "'postgresql://user@host:port/db' or a file path"
        )
    scheme, sep, rest = url.partition("://")
    if not sep:
        return SqliteLedger(Path(url))
    if scheme in _SHARED_SCHEMES:
        try:
            from .postgres import PostgresLedger
        except ImportError as exc:  # psycopg is the 'postgres' extra
            raise InvalidInputError(
                f"ledger URL {scheme}://...: the Postgres ledger needs "
                f"psycopg and psycopg-pool ({exc}); install "
                "backfill[postgres]"
            ) from exc
        return PostgresLedger(url)
    if scheme != "sqlite":
        raise InvalidInputError(
            f"ledger URL {mask_url(url)!r}: unknown scheme {scheme!r}; "
            "expected sqlite:///path or postgresql://user@host:port/db"
        )
    if not rest.startswith("/") or rest == "/":
        raise InvalidInputError(
            f"ledger URL {mask_url(url)!r}: expected "
            "sqlite:///relative/path or sqlite:////absolute/path (three "
            "slashes, then the path)"
        )
    return SqliteLedger(Path(rest[1:]))
