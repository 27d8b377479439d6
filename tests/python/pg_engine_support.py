"""Helpers for the tests of the PostgreSQL engine: the shop on a throwaway server, and the
``postgres`` engine entry point for a checkout whose installed metadata predates it.

Entry points come from the installed package's metadata (written at ``pip install``); until the
package is reinstalled, :func:`ensure_entry_point` adds a one-line distribution on ``sys.path``
that registers it (and returns the folder, for a subprocess's ``PYTHONPATH``). Once the installed
metadata has it, it does nothing.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from backfill.engines import engine_types

_SHIM: Path | None = None
ENTRY = "postgres = backfill.engines.postgres:PostgresEngine.from_settings"


def ensure_entry_point() -> Path | None:
    """Makes ``open_engine`` find the ``postgres`` type in this process; returns the folder
    to put on a subprocess's PYTHONPATH (None when the installed metadata has it)."""
    global _SHIM
    if _SHIM is None and "postgres" in engine_types():
        return None
    if _SHIM is None:
        base = Path(tempfile.mkdtemp(prefix="backfill-ep-"))
        info = base / "backfill_postgres_engine-0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: backfill-postgres-engine\n"
                                       "Version: 0.0\n")
        (info / "entry_points.txt").write_text(f"[backfill.engines]\n{ENTRY}\n")
        _SHIM = base
        sys.path.append(str(base))
    return _SHIM


def subprocess_env() -> dict[str, str]:
    """The environment of a ``backfill`` subprocess that must find the postgres engine."""
    env = dict(os.environ)
    shim = ensure_entry_point()
    if shim is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(shim)) if p)
    return env
