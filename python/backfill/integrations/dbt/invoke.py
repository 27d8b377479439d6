"""Invoking dbt in this process through its programmatic ``dbtRunner``.

dbt's runner keeps process-wide state (flags, the adapter registry, the event logger), so
invocations of one process never overlap: :func:`invoke` holds one lock for the whole call.
dbt also configures logging and may emit warnings from its dependencies; both are confined to
the call (the logging state and the warning filters are restored afterwards).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._extras import extra_required
from ...errors import BackfillError

log = logging.getLogger(__name__)

__all__ = ["DbtInvocationError", "Invocation", "invoke", "invoke_lock"]

# One dbt invocation at a time per process (dbtRunner is not safe to run concurrently).
invoke_lock = threading.RLock()


class DbtInvocationError(BackfillError):
    """dbt could not run the command at all (a bad project, profile or selector)."""


@dataclass(frozen=True)
class Invocation:
    args: tuple[str, ...]
    success: bool
    result: Any  # dbt's result object (RunExecutionResult for run, Manifest for parse, ...)
    exception: BaseException | None  # dbt could not run the command
    seconds: float
    errors: str = ""  # what dbt logged at level error during the call (its error messages)


@contextlib.contextmanager
def _isolated() -> Iterator[None]:
    """Restores the logging configuration and warning filters dbt may change."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.root.manager.disable)
    loggers = {
        name: (list(lg.handlers), lg.level, lg.propagate)
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dbt's and its dependencies' deprecation notices
        try:
            yield
        finally:
            root.handlers[:] = saved[0]
            root.setLevel(saved[1])
            logging.disable(saved[2])
            for name, lg in list(logging.root.manager.loggerDict.items()):
                if not isinstance(lg, logging.Logger):
                    continue
                if name in loggers:
                    lg.handlers[:], level, lg.propagate = (
                        loggers[name][0],
                        loggers[name][1],
                        loggers[name][2],
                    )
                    lg.setLevel(level)


def invoke(
    args: Sequence[str],
    *,
    project_dir: str | Path,
    profiles_dir: str | Path | None = None,
    target: str | None = None,
    target_path: str | Path | None = None,
    check: bool = True,
    manifest: Any = None,
) -> Invocation:
    """Runs ``dbt <args>`` for ``project_dir`` in this process, quietly; returns dbt's result.
    ``check`` raises :class:`DbtInvocationError` when dbt could not run the command at all.
    ``manifest``: a dbt ``Manifest`` (the result of a ``parse`` with the same profile and
    target) that dbt runs on instead of parsing the project again."""
    project = Path(project_dir)
    logs = Path(target_path or project / "target") / "logs"
    full = [
        *args,
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(Path(profiles_dir) if profiles_dir else project),
        "--log-level",
        "none",
        "--log-level-file",
        "error",
        "--log-format-file",
        "text",
        "--log-path",
        str(logs),
    ]
    if target:
        full += ["--target", target]
    if target_path:
        full += ["--target-path", str(target_path)]
    with invoke_lock, _isolated():
        # dbt is optional, and importing it changes logging and warnings: inside _isolated().
        with extra_required("running dbt", "dbt"):
            from dbt.cli.main import dbtRunner

        log_file = logs / "dbt.log"
        offset = log_file.stat().st_size if log_file.is_file() else 0
        began = time.perf_counter()
        res = dbtRunner(manifest=manifest).invoke(full)
        seconds = time.perf_counter() - began
        errors = ""
        if log_file.is_file() and log_file.stat().st_size > offset:
            with log_file.open("rb") as f:
                f.seek(offset)
                errors = f.read().decode("utf-8", "replace")
    log.debug("dbt %s: success=%s in %.2f s", " ".join(args), res.success, seconds)
    if res.exception is not None and check:
        raise DbtInvocationError(
            f"dbt {' '.join(args)} failed in {project}: "
            f"{type(res.exception).__name__}: {res.exception}"
        )
    if check and not res.success and args and args[0] == "parse":
        raise DbtInvocationError(f"dbt parse failed in {project}")
    return Invocation(
        tuple(full), bool(res.success), res.result, res.exception, seconds, _error_text(errors)
    )


def _error_text(log_text: str) -> str:
    """The messages of an error-level dbt text log, without timestamps and colour codes."""
    lines = []
    for line in log_text.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        line = re.sub(r"^\S*\d\d:\d\d:\d\d(\.\d+)?\s+", "", line).rstrip()
        if line.strip():
            lines.append(line.strip())
    return "\n".join(lines)
