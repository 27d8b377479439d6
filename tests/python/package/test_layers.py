"""The package's structure: layer contracts, no import circles, engine-neutral audit and publish,
small modules.

The layer contracts live in pyproject.toml ([tool.importlinter]) and also run as
``lint-imports`` in ``make test``; here they run once more so that a plain ``pytest`` sees them.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "python" / "backfill"
CORE = "backfill._core"  # the C++ extension: grimp reads .py files only, so it never sees it


def _lint_imports() -> str:
    beside = Path(sys.executable).with_name("lint-imports")  # the venv running the tests
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert found, "lint-imports is not installed: it is in the dev extra (pip install -e .[dev])"
    return found


def test_layer_contracts_are_kept() -> None:
    proc = subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "python")},
        timeout=300,
    )
    assert proc.returncode == 0, f"lint-imports failed:\n{proc.stdout}\n{proc.stderr}"
    assert "0 broken" in proc.stdout, proc.stdout


def _graph() -> grimp.ImportGraph:
    # Function-level imports are included (grimp sees every import statement); imports under
    # `if TYPE_CHECKING:` are not, as in the contracts: they are annotations, never executed.
    return grimp.build_graph("backfill", exclude_type_checking_imports=True, cache_dir=None)


def _is_core_import(line: str) -> bool:
    return re.fullmatch(r"from \.+ import _core(\s+#.*)?", line.strip()) is not None


def test_the_package_itself_is_imported_only_for_the_extension() -> None:
    """The contracts ignore `X -> backfill` edges as `_core` imports; this keeps that true."""
    graph = _graph()
    others = [
        f"{d['importer']}:{d['line_number']}: {d['line_contents']}"
        for importer in graph.find_modules_that_directly_import("backfill")
        for d in graph.get_import_details(importer=importer, imported="backfill")
        if not _is_core_import(d["line_contents"])
    ]
    assert not others, (
        "inside the package, import from the module that defines a name, not "
        "from `backfill` (its __init__ imports every stage):\n" + "\n".join(others)
    )


def test_no_import_cycles() -> None:
    graph = _graph()
    g = nx.DiGraph()
    for module in graph.modules:
        g.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            lines = graph.get_import_details(importer=module, imported=imported)
            if imported == "backfill" and all(_is_core_import(d["line_contents"]) for d in lines):
                imported = CORE  # `from .. import _core` is recorded as an import of `backfill`
            g.add_edge(module, imported)
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert not cycles, (
        "import cycles (each line: modules that import each other in a circle):\n"
        + "\n".join(", ".join(c) for c in sorted(cycles))
    )


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


SQL = re.compile(r"\bSELECT\s|\bINSERT\s|\bDELETE\s+FROM\b|\bCREATE\s|\bDESCRIBE\b")


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if path.name != "__init__.py":
        package = package[:-1]
    if not node.level:
        return node.module or ""
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def test_audit_and_publish_hold_no_sql_and_no_duckdb() -> None:
    """Audit and publish decide; the engine (engines/, integrations/dbt/) writes the SQL."""
    found = []
    for folder in (PACKAGE / "audit", PACKAGE / "publish"):
        for path in _modules(folder):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            docstrings = _docstrings(tree)
            name = path.relative_to(ROOT)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in docstrings
                    and SQL.search(node.value)
                ):
                    found.append(f"{name}:{node.lineno}: SQL in code: {node.value[:60]!r}")
                elif isinstance(node, ast.Import):
                    found += [
                        f"{name}:{node.lineno}: import {a.name}"
                        for a in node.names
                        if a.name.split(".")[0] == "duckdb"
                        or a.name.startswith("backfill.engines.duckdb")
                    ]
                elif isinstance(node, ast.ImportFrom):
                    module = _absolute(path, node)
                    names = [f"{module}.{a.name}" for a in node.names]
                    if any(
                        m == "duckdb" or m.startswith(("duckdb.", "backfill.engines.duckdb"))
                        for m in [module, *names]
                    ):
                        found.append(
                            f"{name}:{node.lineno}: from {module} import "
                            + ", ".join(a.name for a in node.names)
                        )
    assert not found, "audit/ and publish/ go through the Engine interface:\n" + "\n".join(found)
