"""The ledger: the state of every backfill, task, attempt, lease, audit and publication.

:class:`LedgerBackend` is what everything else calls; :func:`open_ledger` opens one by URL and
:func:`ledger_for` the one a project's settings name. States and their transitions are in
:mod:`.states`; nothing outside this package touches ledger SQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InvalidInputError
from .backend import LedgerBackend
from .sqlite import (BackfillExistsError, Claim, Ledger, TaskBusyError, TaskRow, new_worker_id,
                     utcnow)
from .states import (AttemptState, BackfillState, IllegalTransitionError, TaskState)

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Project

__all__ = ["AttemptState", "BackfillExistsError", "BackfillState", "Claim",
           "IllegalTransitionError", "Ledger", "LedgerBackend", "TaskBusyError", "TaskRow",
           "TaskState", "ledger_for", "new_worker_id", "open_ledger", "utcnow"]


def _conforms(ledger: Ledger) -> LedgerBackend:
    return ledger  # mypy checks here that the SQLite ledger implements the whole protocol


def ledger_for(project: Project, *, must_exist: bool = False) -> LedgerBackend:
    """The ledger of ``project`` (in its state directory). ``must_exist``: refuse to create one
    (looking up backfills of a project that never recorded any)."""
    if project.settings is None:
        raise InvalidInputError(f"{project!r} has no state directory: load it from a project "
                                "directory (Project.load) or pass ledger=")
    path = Ledger.for_project_path(project.settings.state_dir)
    if must_exist and not path.exists():
        raise InvalidInputError(f"no backfills recorded for project {project.name!r} "
                                f"(no ledger at {path})")
    return Ledger(path)


def open_ledger(url: str | Path) -> LedgerBackend:
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
