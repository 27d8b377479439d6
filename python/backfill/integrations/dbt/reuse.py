"""One parsed dbt manifest per generated profile, reused by the engine's invocations.

Every ``dbt run`` parses the project before it runs anything: about 0.3-0.8 s here even when
dbt's partial parsing applies, most of a one-batch invocation (py-spy on ``dbt_bench.py``:
83% of an invocation's samples were ``setup_manifest``). A backfill invokes dbt once per
group of batches with the same profile, so the engine parses once per profile (``dbt parse``)
and hands the parsed ``Manifest`` to each invocation (``dbtRunner(manifest=...)``, dbt's
documented way to reuse a manifest); dbt then runs without parsing.

The manifest is parsed again when a file dbt parses changed since (the project's files, the
generated profile, installed packages: their modification times and sizes), so a model edited
during a long backfill is run as edited, as ``dbt run`` would. Values of environment variables
read by ``env_var()`` at parse time are taken as of the first parse.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .invoke import invoke, invoke_lock
from .manifest import project_files

log = logging.getLogger(__name__)

__all__ = ["ManifestCache"]

Signature = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class _Parsed:
    signature: Signature
    manifest: Any  # dbt's Manifest


def _signature(project_dir: Path, profiles_dir: Path) -> Signature:
    """(path, mtime, size) of every file whose change changes what dbt parses."""
    files = [*project_files(project_dir), profiles_dir / "profiles.yml"]
    packages = project_dir / "dbt_packages"
    if packages.is_dir():
        files.extend(p for p in packages.rglob("*") if p.is_file())
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue  # removed while we walked: the next signature differs anyway
        out.append((str(f), st.st_mtime_ns, st.st_size))
    return tuple(sorted(out))


class ManifestCache:
    """Parsed manifests of one dbt project, by target path (one per generated profile)."""

    def __init__(self, project_dir: Path, target: str | None) -> None:
        self.project_dir = project_dir
        self.target = target
        self._parsed: dict[str, _Parsed] = {}
        self._lock = threading.Lock()
        self.parses = 0  # dbt parse invocations made (for tests and benchmarks)

    def get(self, profiles_dir: Path, target_path: Path) -> Any | None:
        """The parsed manifest for this profile, parsed now if missing or stale; None when
        dbt cannot parse the project (the run then parses and reports the error itself)."""
        signature = _signature(self.project_dir, profiles_dir)
        key = str(target_path)
        with invoke_lock, self._lock:
            hit = self._parsed.get(key)
            if hit is not None and hit.signature == signature:
                return hit.manifest
            res = invoke(
                ["parse", "--no-write-json"],
                project_dir=self.project_dir,
                profiles_dir=profiles_dir,
                target=self.target,
                target_path=target_path,
                check=False,
            )
            self.parses += 1
            if not res.success or res.result is None:
                log.debug("dbt parse failed in %s: %s", self.project_dir, res.errors)
                self._parsed.pop(key, None)
                return None
            self._parsed[key] = _Parsed(signature, res.result)
            return res.result

    def clear(self) -> None:
        with self._lock:
            self._parsed.clear()
