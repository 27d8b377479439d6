"""dbt's node selection on an imported project, as ``dbt ls --resource-type model`` does it.

Grammar (dbt's ``RAW_SELECTOR_PATTERN``): ``[@][n+][method[.arg]:]value[+n]``; terms separated
by spaces are a union, atoms joined by commas an intersection; ``exclude`` is subtracted.
Methods: the default (``fqn``, or ``path``/``file`` when the value looks like one), ``fqn``,
``tag``, ``path``, ``file``, ``config.<key>``, ``package``, ``source``, ``resource_type``.
Globs follow dbt (``fnmatch``): ``fct_*`` as a default-method value matches fully qualified
names, so it selects nothing, exactly as in dbt; ``tag:fin*`` matches tags.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InvalidInputError, NotFoundError
from .manifest import DbtNode

if TYPE_CHECKING:  # pragma: no cover
    from .mapping import DbtProject

__all__ = ["select_models"]

_ATOM = re.compile(
    r"\A(?P<at>@)?(?:(?P<pdepth>\d*)\+)?(?:(?P<method>[\w.]+):)?(?P<value>.*?)"
    r"(?:\+(?P<cdepth>\d*))?\Z"
)
METHODS = ("fqn", "tag", "path", "file", "config", "package", "source", "resource_type")


def _fqn_match(fqn: list[str], selector: str) -> bool:
    """dbt's is_selected_node (unversioned)."""
    if fqn and fqn[-1] == selector:
        return True
    flat = [item for segment in fqn for item in segment.split(".")]
    parts = selector.split(".")
    if len(flat) < len(parts):
        return False
    for i, part in enumerate(parts):
        if any(w in part for w in "*?[]"):
            return fnmatch(".".join(flat[i:]), ".".join(parts[i:]))
        if flat[i] != part:
            return False
    return True


def _config_match(value: Any, selector: str) -> bool:
    truth = selector.lower()
    if isinstance(value, list):
        return (
            selector in value
            or (truth == "true" and True in value)
            or (truth == "false" and False in value)
        )
    return (
        value == selector
        or (truth == "true" and value is True)
        or (truth == "false" and value is False)
    )


def _descend(config: Any, keys: list[str]) -> tuple[bool, Any]:
    value = config
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


# A selector method (all but ``path``, which reads the file system): (project, config key path,
# value) -> whether a node is selected. Errors in the value are raised when the method is built.
Match = Callable[[DbtNode], bool]


def _fqn(project: DbtProject, args: list[str], value: str) -> Match:
    def match(n: DbtNode) -> bool:
        fqn = list(n.fqn)
        return n.resource_type != "source" and (
            _fqn_match(fqn, value) or _fqn_match(fqn[1:], value)
        )

    return match


def _tag(project: DbtProject, args: list[str], value: str) -> Match:
    return lambda n: any(fnmatch(t, value) for t in n.tags)


def _file(project: DbtProject, args: list[str], value: str) -> Match:
    def match(n: DbtNode) -> bool:
        p = Path(n.path)
        return fnmatch(p.name, value) or fnmatch(p.stem, value)

    return match


def _config(project: DbtProject, args: list[str], value: str) -> Match:
    if not args:
        raise InvalidInputError(
            f"selector config:{value}: expected config.<key>:<value>, "
            "e.g. config.materialized:incremental"
        )

    def match(n: DbtNode) -> bool:
        found, got = _descend(dict(n.config), args)
        return found and _config_match(got, value)

    return match


def _package(project: DbtProject, args: list[str], value: str) -> Match:
    target = project.manifest.project_name if value == "this" else value
    return lambda n: fnmatch(n.package, target)


def _source(project: DbtProject, args: list[str], value: str) -> Match:
    parts = value.split(".")
    if not 1 <= len(parts) <= 3:
        raise InvalidInputError(
            f"source selector {value!r}: expected source, source.table or package.source.table"
        )
    pkg, src, table = (
        (["*"] * (3 - len(parts)) + parts)
        if len(parts) == 3
        else ("*", parts[0], parts[1] if len(parts) == 2 else "*")
    )

    def match(n: DbtNode) -> bool:
        if n.resource_type != "source":
            return False
        source_name, _, table_name = n.name.partition(".")
        return fnmatch(n.package, pkg) and fnmatch(source_name, src) and fnmatch(table_name, table)

    return match


def _resource_type(project: DbtProject, args: list[str], value: str) -> Match:
    return lambda n: n.resource_type == value


_MATCHERS: dict[str, Callable[[DbtProject, list[str], str], Match]] = {
    "fqn": _fqn,
    "tag": _tag,
    "file": _file,
    "config": _config,
    "package": _package,
    "source": _source,
    "resource_type": _resource_type,
}


class _Selector:
    def __init__(self, project: DbtProject) -> None:
        self.project = project
        self.nodes: list[DbtNode] = list(project.manifest)
        self.root = project.project_dir

    def method(self, name: str, args: list[str], value: str) -> set[str]:
        """The names of the nodes that selector method ``name`` (with ``config``'s key path
        ``args``) selects for ``value``."""
        if name == "path":
            return self._path(value)
        matcher = _MATCHERS.get(name)
        if matcher is None:
            raise InvalidInputError(
                f"selector method {name!r} is not supported; supported: {', '.join(METHODS)}"
            )
        match = matcher(self.project, args, value)
        return {n.name for n in self.nodes if match(n)}

    def _path(self, value: str) -> set[str]:
        if self.root is not None:
            paths = {p.relative_to(self.root) for p in self.root.glob(value)}
        else:  # a manifest alone: match the recorded paths
            paths = {Path(n.path) for n in self.nodes if fnmatch(n.path, value)} | {Path(value)}
        out = set()
        for n in self.nodes:
            ofp = Path(n.path)
            patch = n.raw.get("patch_path")
            if (
                ofp in paths
                or any(parent in paths for parent in ofp.parents)
                or (
                    isinstance(patch, str)
                    and "://" in patch
                    and Path(patch.split("://", 1)[1]) in paths
                )
            ):
                out.add(n.name)
        return out

    def atom(self, text: str) -> set[str]:
        m = _ATOM.match(text)
        if m is None or not m.group("value"):
            raise InvalidInputError(
                f"selector {text!r} is not a dbt selector; expected e.g. "
                "'fct_daily_sales+', '+x', '@x', 'tag:daily', 'path:models/x'"
            )
        if m.group("at") and m.group("pdepth") is not None:
            raise InvalidInputError(f"selector {text!r}: '@' and a leading '+' cannot be combined")
        value = m.group("value")
        method = m.group("method")
        if method is None:
            name = (
                "path"
                if "/" in value
                else "file"
                if value.lower().endswith((".sql", ".py", ".csv"))
                else "fqn"
            )
            args: list[str] = []
        else:
            name, *args = method.split(".")
        base = self.method(name, args, value)
        out = set(base)
        graph = self.project
        if m.group("at"):
            down = {d for b in base for d in graph.downstream(b)} | base
            out = down | {u for d in down for u in graph.upstream(d)}
            return out
        if m.group("pdepth") is not None:
            depth = int(m.group("pdepth")) if m.group("pdepth") else None
            if depth != 0:
                out |= {u for b in base for u in graph.upstream(b, depth)}
        if m.group("cdepth") is not None:
            depth = int(m.group("cdepth")) if m.group("cdepth") else None
            if depth != 0:
                out |= {d for b in base for d in graph.downstream(b, depth)}
        return out

    def expression(self, text: str) -> set[str]:
        out: set[str] = set()
        for term in text.split():
            atoms = [self.atom(a) for a in term.split(",") if a]
            if atoms:
                out |= set.intersection(*atoms)
        return out


def select_models(project: DbtProject, select: str, exclude: str | None = None) -> list[str]:
    """Model names selected by ``select`` minus ``exclude``, in topological order."""
    if not isinstance(select, str) or not select.strip():
        raise InvalidInputError(f"selector {select!r} is not a non-empty string")
    sel = _Selector(project)
    chosen = sel.expression(select)
    if not chosen:
        raise NotFoundError(
            f"selector {select!r} matches no model, seed, snapshot or source of "
            f"dbt project {project.name!r} (dbt would select nothing too)"
        )
    if exclude:
        chosen -= sel.expression(exclude)
    return [m for m in project.topological_order() if m in chosen]
