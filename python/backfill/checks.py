"""Static model checks the planner reports before a backfill runs.

:func:`check_model` combines what can be known without an engine: the model's write strategy and
the lint findings on its SQL. (The run-twice check, which runs a partition twice and compares
fingerprints, needs an engine and belongs to the runner.)

>>> r = check_model(sql="select * from {{ ref('orders') }}", strategy="append")
>>> r.codes()
['APPEND_STRATEGY']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from .errors import InvalidInputError
from .lint import Finding, IgnoreSpec, LintResult, lint_sql

# Write strategies: dbt's incremental strategies plus whole-table ones. Only "append" is unsafe to
# re-run; the others replace or merge the period or the table.
STRATEGIES: tuple[str, ...] = (
    "append",
    "merge",
    "delete+insert",
    "insert_overwrite",
    "microbatch",
    "replace_where",
    "overwrite",
    "table",
    "view",
    "full_refresh",
)

APPEND_STRATEGY = "APPEND_STRATEGY"


def check_model(
    *,
    sql: str | bytes,
    strategy: str | None = None,
    dialect: str = "duckdb",
    partitioned_inputs: Iterable[str] | str | None = None,
    ignore: IgnoreSpec = None,
    period_params: Iterable[str] | str = ("start", "end"),
    microbatch: bool | None = None,
    path: str | os.PathLike[str] | None = None,
) -> LintResult:
    """Findings for one model: lint findings plus ``APPEND_STRATEGY`` for an append strategy.

    ``strategy`` is the model's write strategy (one of :data:`STRATEGIES`); None takes
    ``incremental_strategy`` from the model's ``{{ config(...) }}`` when it has one. A strategy of
    ``"microbatch"`` also tells the lint that dbt filters ``ref()``/``source()`` by batch.
    ``ignore`` may name ``APPEND_STRATEGY`` too (with a reason), like any lint rule.
    """
    if strategy is not None and strategy not in STRATEGIES:
        raise InvalidInputError(
            f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}"
        )
    ignore_pairs = _split_ignore(ignore)
    append_reason = ignore_pairs.pop(APPEND_STRATEGY, None)
    if microbatch is None and strategy == "microbatch":
        microbatch = True
    result = lint_sql(
        sql,
        dialect=dialect,
        partitioned_inputs=partitioned_inputs,
        ignore=ignore_pairs,
        period_params=period_params,
        microbatch=microbatch,
        path=path,
    )
    effective = strategy if strategy is not None else result.config.get("incremental_strategy")
    findings = list(result.all)
    if effective == "append":
        source = "strategy" if strategy is not None else "config(incremental_strategy='append')"
        findings.insert(
            0,
            Finding(
                code=APPEND_STRATEGY,
                severity="error",
                line=1,
                column=1,
                text=effective,
                message=(
                    f"the model's {source} appends: re-running a period (which is what a "
                    "backfill does) adds its rows a second time"
                ),
                hint=(
                    "use a strategy that replaces the period (delete+insert, insert_overwrite, "
                    "microbatch) or merges on a unique key (merge)"
                ),
                suppressed=append_reason is not None,
                reason=append_reason or "",
                path=result.path,
            ),
        )
    return LintResult(findings, inputs=result.inputs, config=result.config, path=result.path)


def _split_ignore(ignore: IgnoreSpec) -> dict[str, str]:
    if ignore is None:
        return {}
    if isinstance(ignore, str):
        return {ignore: ""}
    if isinstance(ignore, Mapping):
        return {str(k): str(v) for k, v in ignore.items()}
    out: dict[str, str] = {}
    for item in ignore:
        if isinstance(item, str):
            out[item] = ""
        elif isinstance(item, tuple) and len(item) == 2:
            out[str(item[0])] = str(item[1])
        else:
            raise InvalidInputError(
                f"ignore entry {item!r} is not a rule code or a (code, reason) pair"
            )
    return out


__all__ = ["APPEND_STRATEGY", "STRATEGIES", "check_model"]
