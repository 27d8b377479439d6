"""The run-twice check (``backfill check``): run one partition of a model twice into scratch
areas and compare the runs.

>>> print(check_run_twice(project, "fct_daily_sales", "2026-08-03"))   # doctest: +SKIP

A backfill is only reproducible when a run is a function of its period: two runs of the same
partition must give the same rows. On a difference the columns that differ are found by the
C++ fingerprint and the rows by the diff; the lint and strategy findings of the model's SQL say
what probably reads the clock. The scratch areas are dropped when the check ends.
"""

from __future__ import annotations

import datetime as dt
import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..calendar import partition_of
from ..checks import check_model
from ..engines import Area, Engine, scratch_area
from ..engines.registry import engine_for
from ..errors import InvalidInputError, NotFoundError
from ..lint import LintResult
from .diff import DiffResult, diff
from .fingerprint import fingerprint
from .keys import Version, choose_key

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

__all__ = ["RunTwiceReport", "check_run_twice"]

# The project's write strategies as check_model names them.
_STRATEGY = {"replace": "delete+insert", "merge": "merge", "full": "table"}


def _explain(
    eng: Engine, project: Project, model: str, a1: Area, a2: Area
) -> tuple[list[str], list[str], DiffResult]:
    """(differing columns, key, diff) of two runs of ``model`` in areas ``a1`` and ``a2``."""
    with eng.stream(project, model, a1, None) as s1, eng.stream(project, model, a2, None) as s2:
        differing = fingerprint(s1).differing_columns(fingerprint(s2))
    columns = eng.columns(project, model, a1) or []
    key, _ = choose_key(eng, project, model, [Version(a1), Version(a2)], columns, None)
    with eng.stream(project, model, a1, None) as s1, eng.stream(project, model, a2, None) as s2:
        result = diff(s1, s2, key=key, on_duplicate="report")
    return differing, key, result


@dataclass
class RunTwiceReport:
    """Two runs of one partition of one model compared, plus the model's static findings."""

    model: str
    partition: str
    fingerprints: tuple[str, str]
    differing_columns: list[str]
    diff: DiffResult | None
    findings: LintResult
    key: list[str] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return self.fingerprints[0] == self.fingerprints[1]

    @property
    def ok(self) -> bool:
        return self.deterministic and not self.findings.errors

    def __str__(self) -> str:
        lines = []
        if self.deterministic:
            lines.append(
                f"check {self.model} {self.partition}: ran twice, identical "
                f"(fingerprint {self.fingerprints[0]})"
            )
        else:
            lines.append(
                f"check {self.model} {self.partition}: ran twice, the runs DIFFER "
                f"({self.fingerprints[0]} vs {self.fingerprints[1]})"
            )
            if self.differing_columns:
                counts = self.diff.changed_columns() if self.diff is not None else {}
                cols = ", ".join(
                    f"{c} ({counts[c]:,} rows)" if c in counts else c
                    for c in self.differing_columns
                )
                lines.append(f"  columns that differ between runs: {cols}")
            lines.append(
                "  a backfill of this model is not reproducible: find what reads the "
                "clock or randomness (lint below) and make it a function of the period"
            )
        if self.findings.all:
            lines.append("  findings:")
            lines += [f"    {line}" for line in str(self.findings).splitlines()]
        else:
            lines.append("  lint and strategy: no findings")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "partition": self.partition,
            "deterministic": self.deterministic,
            "ok": self.ok,
            "fingerprints": list(self.fingerprints),
            "differing_columns": self.differing_columns,
            "key": self.key,
            "changed_columns": self.diff.changed_columns() if self.diff else {},
            "findings": self.findings.to_dicts(),
        }

    def _repr_html_(self) -> str | None:
        return f"<pre>{html.escape(str(self))}</pre>"


def _partition(
    project: Project, model: str, partition: str | dt.date | dt.datetime
) -> tuple[str, dt.datetime, dt.datetime]:
    m = project.models[model]
    if not m.grain or not m.event_time or m.strategy == "full":
        raise InvalidInputError(
            f"model {model!r} is not partitioned (strategy {m.strategy}, "
            f"grain {m.grain}); nothing to check per partition"
        )
    value: Any = partition
    if isinstance(partition, str):
        text = partition.strip()
        if len(text) == 7 and text[4] == "-":  # 2026-08: a month label
            text += "-01"
        value = text
    try:
        p = partition_of(value, m.grain, m.tz)
    except InvalidInputError as exc:  # what the C++ calendar raises for any unreadable instant
        raise InvalidInputError(
            f"partition {partition!r} of {model}: expected an ISO date or "
            f"date-time inside a {m.grain} partition ({exc})"
        ) from None
    return p.label, p.start, p.end


def check_run_twice(
    project: Project,
    model: str,
    partition: str | dt.date | dt.datetime,
    *,
    engine: Engine | None = None,
) -> RunTwiceReport:
    """Runs ``model`` for ``partition`` twice into scratch areas and compares the results
    (fingerprints; on a difference the differing columns, by the diff engine), plus the lint
    and strategy findings of its SQL (:func:`backfill.check_model`)."""
    if model not in project.models:
        raise NotFoundError(
            f"no model {model!r} in project {project.name!r} (models: {', '.join(project.models)})"
        )
    m = project.models[model]
    label, start, end = _partition(project, model, partition)
    eng = engine or engine_for(project)
    differing: list[str] = []
    result: DiffResult | None = None
    key: list[str] = []
    periods = {model: [(start, end)]}
    try:
        with scratch_area(eng, "check1", periods) as a1, scratch_area(eng, "check2", periods) as a2:
            fps = [eng.run_task(project, model, start, end, a).fingerprint for a in (a1, a2)]
            if fps[0] != fps[1]:
                differing, key, result = _explain(eng, project, model, a1, a2)
    finally:
        eng.close()
    parents = [
        d.parent
        for d in m.depends_on
        if d.parent in project and getattr(project[d.parent], "grain", None)
    ]
    # Sources are named "schema.table" in the project, as the lint wants for source() reads.
    findings = check_model(
        sql=m.sql or "", strategy=_STRATEGY.get(m.strategy), partitioned_inputs=parents
    )
    return RunTwiceReport(
        model, label, (str(fps[0]), str(fps[1])), differing, result, findings, key
    )
