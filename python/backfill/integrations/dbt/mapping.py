"""A dbt manifest as a backfill :class:`~backfill.Project`.

What each dbt node becomes:

==========================================  =================================================
dbt                                         backfill
==========================================  =================================================
incremental, ``microbatch``                 partitioned by ``batch_size`` in UTC, strategy
                                            ``replace`` (dbt deletes and inserts each batch)
incremental ``append`` (dbt-duckdb's        strategy ``append``: the planner's
default without ``unique_key``)             ``APPEND_STRATEGY`` error
incremental merge, delete+insert,           rebuilt whole (strategy ``full``): a backfill runs
insert_overwrite                            them with ``--full-refresh`` after their inputs
table; view; ephemeral                      rebuilt whole; ``view``; ``view`` (inlined by dbt)
source, seed, snapshot                      sources (inputs a backfill reads, never rewrites)
==========================================  =================================================

A microbatch model reads a parent with ``event_time`` batch by batch (dbt filters it); a parent
without one is read whole by every batch: the mapping is ``all_of(parent)`` and the model's
check reports ``FULL_SCAN_INPUT``. dbt ignores ``begin`` when ``--event-time-start`` is given,
so the planner does too (``begin`` stays in ``meta``); every dbt config we read is in
``model.meta["dbt"]``. A non-microbatch incremental model with ``full_refresh=false`` cannot be
rebuilt by dbt: its check reports ``FULL_REFRESH_DISABLED`` (error).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...api import Project
from ...checks import check_model
from ...errors import BackfillError
from ...lint import Finding, LintResult
from ...model import Dependency, all_of
from .manifest import DbtError, DbtManifest, DbtNode
from .selectors import select_models

log = logging.getLogger(__name__)

__all__ = ["INCREMENTAL_STRATEGIES", "DbtProject", "project_from_manifest"]

INCREMENTAL_STRATEGIES = ("microbatch", "append", "merge", "delete+insert", "insert_overwrite")
BATCH_SIZES = ("hour", "day", "month", "year")
# The dbt config keys kept in meta["dbt"] (the list, plus what the engine needs).
CONFIG_KEYS = (
    "materialized",
    "incremental_strategy",
    "event_time",
    "batch_size",
    "begin",
    "lookback",
    "concurrent_batches",
    "unique_key",
    "full_refresh",
    "on_schema_change",
    "schema",
    "alias",
    "database",
    "meta",
)
FULL_SCAN_INPUT = "FULL_SCAN_INPUT"
FULL_REFRESH_DISABLED = "FULL_REFRESH_DISABLED"


@dataclass(frozen=True)
class DbtInfo:
    """Where a mapped node came from."""

    unique_id: str
    resource_type: str
    path: str
    relation: str | None
    schema: str | None
    alias: str | None


class DbtProject(Project):
    """A :class:`Project` imported from a dbt manifest; ``manifest`` and ``project_dir`` say from
    where. Selection, planning and checks behave as dbt's where dbt defines them."""

    # `dbt run --event-time-start/--event-time-end` runs every batch the period touches, this
    # year's batch of a yearly model too: plan it as well (README: "exactly the batches").
    runs_in_progress = True

    def __init__(self, name: str, manifest: DbtManifest, project_dir: Path | None) -> None:
        super().__init__(name)
        self.manifest = manifest
        self.project_dir = project_dir
        self.dbt: dict[str, DbtInfo] = {}

    def __repr__(self) -> str:
        return (
            f"DbtProject({self.name!r}: {len(self.sources)} sources, {len(self.models)} "
            f"models; manifest v{self.manifest.version}, dbt {self.manifest.dbt_version})"
        )

    def dbt_strategy(self, model: str) -> str:
        """The model's dbt write strategy: an incremental strategy, ``table``, ``view``..."""
        meta = self.models[model].meta.get("dbt", {})
        if meta.get("materialized") == "incremental":
            return str(meta.get("incremental_strategy") or "append")
        return (
            "view"
            if meta.get("materialized") == "ephemeral"
            else str(meta.get("materialized") or "table")
        )

    def is_microbatch(self, model: str) -> bool:
        return self.dbt_strategy(model) == "microbatch"

    def select(self, select: str, exclude: str | None = None) -> list[str]:
        """Model names matching a dbt selector, as ``dbt ls --resource-type model`` lists them:
        names, ``+``/``n+``, ``@``, ``tag:``, globs, and ``path:``, ``config.KEY:VALUE``,
        ``fqn:``, ``package:``, ``resource_type:``
        (see :mod:`backfill.integrations.dbt.selectors`)."""
        return select_models(self, select, exclude)

    def check(self, model: str, *, dialect: str = "duckdb") -> LintResult:
        """The lint of the model's raw SQL (Jinja included) with its dbt strategy, plus
        ``FULL_SCAN_INPUT`` for each parent of a microbatch model that dbt cannot filter by
        batch (no ``event_time``)."""
        m = self.models[model]
        info = self.dbt[model]
        strategy = self.dbt_strategy(model)
        micro = strategy == "microbatch"
        parents = [d.parent for d in m.depends_on]
        result = check_model(
            sql=m.sql or "",
            strategy=strategy if strategy in _LINT_STRATEGIES else None,
            dialect=dialect,
            microbatch=micro,
            # Full rebuilds read their inputs whole by design; microbatch parents are filtered.
            partitioned_inputs=sorted({*parents, *(p.split(".")[-1] for p in parents)})
            if micro
            else None,
            path=self._file(info),
        )
        extra: list[Finding] = []
        meta = m.meta.get("dbt", {})
        if (
            not micro
            and meta.get("materialized") == "incremental"
            and meta.get("full_refresh") is False
        ):
            extra.append(
                Finding(
                    code=FULL_REFRESH_DISABLED,
                    severity="error",
                    line=1,
                    column=1,
                    text="full_refresh=false",
                    message=(
                        f"{model} is an incremental model ({strategy}) that a backfill rebuilds "
                        "with --full-refresh, but its config full_refresh=false makes dbt "
                        "ignore that: its past would not be rebuilt"
                    ),
                    hint="make it a microbatch model, or leave it out of the backfill (--exclude)",
                    path=result.path,
                )
            )
        if micro:
            extra += [
                self._full_scan(model, d.parent, result) for d in m.depends_on if d.mapping == "all"
            ]
        if not extra:
            return result
        return LintResult(
            [*result.all, *extra], inputs=result.inputs, config=result.config, path=result.path
        )

    def _file(self, info: DbtInfo) -> str:
        return str(self.project_dir / info.path) if self.project_dir else info.path

    def _full_scan(self, model: str, parent: str, result: LintResult) -> Finding:
        line, column = 1, 1
        for read in result.inputs:
            if read.name in (parent, parent.split(".", 1)[-1]) or read.name.replace(
                ".", ""
            ) == parent.replace(".", ""):
                line, column = read.line, read.column
                break
        kind = self.dbt[parent].resource_type if parent in self.dbt else "input"
        return Finding(
            code=FULL_SCAN_INPUT,
            severity="warning",
            line=line,
            column=column,
            text=parent,
            message=(
                f"{model} is a microbatch model but its {kind} {parent} has no event_time, "
                f"so dbt cannot filter it to the batch: every batch reads all of {parent}"
            ),
            hint=(
                f"set event_time on {parent} (config(event_time=...) or its yml config) if it "
                "has a time column; a small dimension may be fine read whole"
            ),
            path=result.path,
        )


_LINT_STRATEGIES = (
    "append",
    "merge",
    "delete+insert",
    "insert_overwrite",
    "microbatch",
    "table",
    "view",
)


def _begin(value: object, where: str) -> dt.datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        t = value
    else:
        try:
            t = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise DbtError(f"{where}: begin {value!r} is not an ISO date or date-time") from None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t  # dbt: naive is UTC


def _dbt_meta(node: DbtNode) -> dict[str, Any]:
    cfg = node.config
    meta: dict[str, Any] = {k: cfg.get(k) for k in CONFIG_KEYS if cfg.get(k) is not None}
    meta.update(
        unique_id=node.unique_id,
        resource_type=node.resource_type,
        path=node.path,
        relation=node.relation,
        tags=list(node.tags),
    )
    if node.resource_type == "source":
        for key in ("loaded_at_field", "freshness", "source_name", "identifier"):
            if node.raw.get(key) is not None:
                meta[key] = node.raw.get(key)
    return meta


def project_from_manifest(manifest: DbtManifest, project_dir: Path | None = None) -> DbtProject:
    """Maps the manifest's models, seeds, snapshots and sources (module docstring)."""
    project = DbtProject(manifest.project_name, manifest, project_dir)
    names = {n.unique_id: n.name for n in manifest}
    inputs = [n for n in manifest if n.resource_type != "model"]
    for node in inputs:
        kind = "raw" if node.resource_type == "source" else "external"
        project.source(
            node.name, event_time=node.event_time, kind=kind, meta={"dbt": _dbt_meta(node)}
        )
        project.dbt[node.name] = _info(node)
    models = [n for n in manifest if n.resource_type == "model"]
    for node in models:
        where = f"{node.path or node.unique_id} (model {node.name!r})"
        try:
            _add_model(project, manifest, node, names, where)
        except DbtError:
            raise
        except BackfillError as exc:
            raise DbtError(f"{where}: {exc}") from None
    try:
        project.validate()
    except BackfillError as exc:
        raise DbtError(f"{manifest.path}: {exc}") from None
    log.info("imported %r from %s", project, manifest.path)
    return project


def _info(node: DbtNode) -> DbtInfo:
    return DbtInfo(
        node.unique_id, node.resource_type, node.path, node.relation, node.schema, node.alias
    )


def _add_model(
    project: DbtProject, manifest: DbtManifest, node: DbtNode, names: Mapping[str, str], where: str
) -> None:
    cfg = node.config
    materialized = node.materialized or "view"
    strategy_name = cfg.get("incremental_strategy")
    if materialized == "incremental" and not strategy_name:
        # dbt-duckdb's default: delete+insert with a unique_key, append without one.
        strategy_name = "delete+insert" if cfg.get("unique_key") else "append"
    if (
        strategy_name is not None
        and strategy_name not in INCREMENTAL_STRATEGIES
        and materialized == "incremental"
    ):
        log.warning(
            "%s: incremental_strategy %r is not one backfill knows; treated as a full rebuild",
            where,
            strategy_name,
        )
    meta = _dbt_meta(node)
    if materialized == "incremental":
        meta["incremental_strategy"] = strategy_name
    parents = [p for p in node.depends_on if p in names]
    micro = materialized == "incremental" and strategy_name == "microbatch"
    deps: list[Dependency] = []
    for uid in parents:
        parent = manifest.nodes[uid]
        if micro and not parent.event_time:
            deps.append(all_of(parent.name))  # every batch reads it whole
        else:
            deps.append(Dependency(parent.name))
    keys = cfg.get("unique_key")
    unique_key = [keys] if isinstance(keys, str) else list(keys or [])
    if micro:
        batch = cfg.get("batch_size")
        if batch not in BATCH_SIZES:
            raise DbtError(
                f"{where}: microbatch batch_size {batch!r}; expected one of "
                f"{', '.join(BATCH_SIZES)}"
            )
        if not node.event_time:
            raise DbtError(f"{where}: a microbatch model needs event_time (dbt refuses it too)")
        begin = _begin(cfg.get("begin"), where)
        if begin is not None:
            meta["begin"] = begin.isoformat()
        project.model(
            node.name,
            depends_on=deps,
            grain=str(batch),
            tz="UTC",
            strategy="replace",
            event_time=node.event_time,
            tags=node.tags,
            sql=node.raw_code,
            meta={"dbt": meta},
        )
    else:
        strategy = {"view": "view", "ephemeral": "view"}.get(materialized, "full")
        if materialized == "incremental" and strategy_name == "append":
            strategy = "append"
        project.model(
            node.name,
            depends_on=deps,
            strategy=strategy,
            event_time=node.event_time,
            unique_key=unique_key or None,
            tags=node.tags,
            sql=node.raw_code,
            meta={"dbt": meta},
        )
    project.dbt[node.name] = _info(node)
