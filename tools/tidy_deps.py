"""Writes the header dependencies of each clang-tidy stamp (``make lint``) from the dev build.

clang-tidy runs each source alone and writes no dependency file, but the dev build's ninja
records, for every object, the headers its source included. For each source of cpp/src and
cpp/bindings in the compile database this writes ``<tidy dir>/<source minus .cpp>.d``, a make
rule ``<stamp>: <the project's headers it includes>``, so that editing a header re-runs
clang-tidy on exactly the sources that include it. System and third-party headers are left out
(a new compiler or library arrives with a rebuild, which the stamps do not track).

    python tools/tidy_deps.py build/dev build/tidy
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TIDIED = ("cpp/src/", "cpp/bindings/")


def ninja_of(build_dir: Path) -> str:
    """The ninja that built ``build_dir`` (the venv's, from pip, on a fresh machine)."""
    for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
        if line.startswith("CMAKE_MAKE_PROGRAM:"):
            return line.partition("=")[2]
    return "ninja"


def headers_of(ninja: str, build_dir: Path, obj: str, root: Path) -> list[str]:
    """The project's headers (paths relative to ``root``) that ninja recorded for ``obj``."""
    out = subprocess.run(
        [ninja, "-C", str(build_dir), "-t", "deps", obj],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = []
    for line in out.splitlines()[1:]:
        path = Path(line.strip())
        if line.startswith(" ") and path.suffix in (".hpp", ".h") and path.is_relative_to(root):
            found.append(str(path.relative_to(root)))
    return sorted(set(found))


def main(build: str, tidy: str) -> int:
    root = Path.cwd().resolve()
    build_dir, tidy_dir = Path(build), Path(tidy)
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    ninja = ninja_of(build_dir)
    done = set()
    for e in entries:
        source = Path(e["file"]).resolve().relative_to(root)
        if not str(source).startswith(TIDIED) or source in done:
            continue
        done.add(source)
        obj = str(Path(e["output"]).resolve().relative_to(build_dir.resolve()))
        stamp = tidy_dir / source.with_suffix(".ok")
        rule = f"{stamp}: {' '.join(headers_of(ninja, build_dir, obj, root))}\n"
        dep = stamp.with_suffix(".d")
        dep.parent.mkdir(parents=True, exist_ok=True)
        if not dep.exists() or dep.read_text() != rule:
            dep.write_text(rule)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
