"""Audit gates: conditions a backfill's audit must meet before it may be published.

Gates come from ``backfill.yml`` (``audits: {model: [gate, ...]}``, ``"*"`` for every model) and
from the call (``bf.audit(gates={"fct_daily_sales": [...]})``, added to the file's). Each gate is
one small mapping:

* ``{measure: revenue, change: ["-5%", "0%"]}`` -- the measure's total over the backfilled
  periods may change by -5 % .. 0 % (numbers without ``%`` are absolute amounts);
* ``{removed_rows: 0}``, ``{added_rows: N}``, ``{changed_rows: N}`` -- at most N rows in total;
* ``{changed_rows_per_partition: N}`` -- at most N changed rows in any one partition;
* ``{unchanged: [col, ...]}`` -- these columns change in no row;
* ``{schema_change: false}`` -- no column added, removed or retyped.

A gate passes or fails with a reason that names the numbers. Measure gates compare exactly:
bounds are read as decimals ("-5%" is -5 exactly), and integer and decimal totals, their delta and
their percentage change are computed without binary floats (float measures stay floats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from .._numbers import Number, delta, fmt, pct_exact, to_kind
from ..errors import InvalidInputError

__all__ = ["Gate", "GateResult", "ModelFacts", "evaluate", "parse_gates"]

_COUNT_GATES = ("removed_rows", "added_rows", "changed_rows", "changed_rows_per_partition")
KINDS = ("measure", *_COUNT_GATES, "unchanged", "schema_change")


@dataclass(frozen=True)
class Bound:
    value: Decimal  # exactly as written: "-0.1" is -0.1, not the binary float nearest to it
    relative: bool  # "-5%" -> value=-5, relative

    def __str__(self) -> str:
        return f"{self.value:f}%" if self.relative else f"{self.value:f}"

    def against(self, x: Number) -> Number:
        """The bound in ``x``'s arithmetic: a float for float values, else the exact Decimal."""
        return float(self.value) if isinstance(x, float) else self.value


@dataclass(frozen=True)
class Gate:
    """One parsed gate of one model (``spec`` is the mapping it came from)."""

    model: str
    kind: str
    spec: Mapping[str, Any]
    measure: str | None = None
    low: Bound | None = None
    high: Bound | None = None
    limit: int | None = None
    columns: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "measure":
            return f"{self.measure} change in [{self.low}, {self.high}]"
        if self.kind in _COUNT_GATES:
            return f"{self.kind} <= {self.limit}"
        if self.kind == "unchanged":
            return f"unchanged: {', '.join(self.columns)}"
        return "no schema change"


@dataclass(frozen=True)
class GateResult:
    model: str
    gate: str
    passed: bool
    reason: str

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.model}: {self.gate} -- {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gate": self.gate,
            "passed": self.passed,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ModelFacts:
    """What the gates of one model look at (from its audit)."""

    totals: Mapping[str, tuple[Number | None, Number | None]]  # measure -> (old, new) totals
    added: int
    removed: int
    changed: int
    changed_per_partition: Mapping[str, int]
    column_changes: Mapping[str, int]
    schema_changes: Sequence[str]
    columns: Sequence[str]


def _bound(value: object, where: str) -> Bound:
    if isinstance(value, bool):
        raise InvalidInputError(f"{where}: {value!r} is not a bound; expected a number or 'N%'")
    text = None
    relative = False
    if isinstance(value, (int, float, Decimal)):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
        relative = text.endswith("%")
        text = text[:-1] if relative else text
    if text is not None:
        try:
            number = Decimal(text)
        except InvalidOperation:
            number = Decimal("NaN")
        if number.is_finite():
            return Bound(number, relative)
    raise InvalidInputError(
        f"{where}: {value!r} is not a bound; expected a number or 'N%' (e.g. '-5%')"
    )


def _gate(model: str, spec: object, where: str) -> Gate:
    if not isinstance(spec, Mapping) or not spec:
        raise InvalidInputError(
            f"{where}: gate {spec!r} is not a mapping; expected e.g. "
            "{measure: revenue, change: ['-5%', '0%']} or {removed_rows: 0}"
        )
    keys = set(spec)
    if "measure" in keys:
        return _measure_gate(model, spec, where)
    if len(keys) != 1:
        raise InvalidInputError(
            f"{where}: gate {dict(spec)!r} must have one key of {', '.join(KINDS)}"
        )
    (kind,) = keys
    return _single_key_gate(model, kind, spec, where)


def _measure_gate(model: str, spec: Mapping[str, Any], where: str) -> Gate:
    """``{measure: revenue, change: [low, high]}``."""
    keys = set(spec)
    if keys != {"measure", "change"}:
        raise InvalidInputError(
            f"{where}: a measure gate takes exactly 'measure' and 'change', got {sorted(keys)}"
        )
    measure, change = spec["measure"], spec["change"]
    if not isinstance(measure, str) or not measure:
        raise InvalidInputError(f"{where}: measure {measure!r} is not a column name")
    if isinstance(change, str) or not isinstance(change, Sequence) or len(change) != 2:
        raise InvalidInputError(
            f"{where}: change {change!r} must be [low, high], e.g. ['-5%', '0%']"
        )
    low, high = _bound(change[0], where), _bound(change[1], where)
    if low.relative == high.relative and low.value > high.value:
        raise InvalidInputError(f"{where}: change [{low}, {high}] has low > high")
    return Gate(model, "measure", dict(spec), measure=measure, low=low, high=high)


def _single_key_gate(model: str, kind: str, spec: Mapping[str, Any], where: str) -> Gate:
    """A gate of one key: a row count limit, ``unchanged`` columns or ``schema_change: false``."""
    value = spec[kind]
    if kind in _COUNT_GATES:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{where}: {kind}: {value!r} is not a row count >= 0")
        return Gate(model, kind, dict(spec), limit=value)
    if kind == "unchanged":
        cols = [value] if isinstance(value, str) else value
        if (
            not isinstance(cols, Sequence)
            or not cols
            or not all(isinstance(c, str) and c for c in cols)
        ):
            raise InvalidInputError(f"{where}: unchanged: {value!r} must be column names")
        return Gate(model, kind, dict(spec), columns=tuple(cols))
    if kind == "schema_change":
        if value is not False:
            raise InvalidInputError(
                f"{where}: schema_change: {value!r}; only 'false' (no "
                "schema change allowed) is a gate"
            )
        return Gate(model, kind, dict(spec))
    raise InvalidInputError(f"{where}: unknown gate {kind!r}; expected one of {', '.join(KINDS)}")


def parse_gates(
    spec: Mapping[str, Any] | None,
    models: Sequence[str],
    where: str = "gates",
    *,
    strict: bool = True,
) -> dict[str, list[Gate]]:
    """``{model or "*": [gate, ...]}`` -> gates per model in ``models``. With ``strict`` (gates
    given to one audit) a model named but not backfilled is an error: a gate that silently
    checks nothing is worse than none. The project's gates name any of its models."""
    out: dict[str, list[Gate]] = {m: [] for m in models}
    if spec is None:
        return out
    if not isinstance(spec, Mapping):
        raise InvalidInputError(f"{where}: {spec!r} is not a mapping of model -> list of gates")
    for model, gates in spec.items():
        if model != "*" and model not in out:
            if not strict:
                continue
            raise InvalidInputError(
                f"{where}: {model!r} is not a model of this backfill ({', '.join(models)})"
            )
        if isinstance(gates, Mapping):
            gates = [gates]
        if not isinstance(gates, Sequence) or isinstance(gates, str):
            raise InvalidInputError(f"{where}.{model}: {gates!r} is not a list of gates")
        for i, g in enumerate(gates):
            targets = list(models) if model == "*" else [model]
            for target in targets:
                out[target].append(_gate(target, g, f"{where}.{model}[{i}]"))
    return out


def _measure(gate: Gate, facts: ModelFacts) -> GateResult:
    assert gate.measure is not None and gate.low is not None and gate.high is not None
    if gate.measure not in facts.totals:
        known = ", ".join(facts.totals) or "none"
        return GateResult(
            gate.model,
            str(gate),
            False,
            f"{gate.measure!r} is not a numeric column of {gate.model} (measures: {known})",
        )
    old, new = facts.totals[gate.measure]
    o: Number = old if old is not None else (new * 0 if new is not None else 0)
    n: Number = new if new is not None else o * 0
    d = delta(o, n)
    assert d is not None
    pct = pct_exact(o, n)
    fails = []
    for bound, name in ((gate.low, "below"), (gate.high, "above")):
        if bound.relative:
            if pct is None:
                if d != 0:
                    fails.append("the old total is 0 so a relative change is undefined")
                continue
            b = bound.against(pct)
            out = pct < b if name == "below" else pct > b
        else:
            b = bound.against(d)
            out = d < b if name == "below" else d > b
        if out:
            fails.append(f"{name} {bound}")
    pct_text = "n/a" if pct is None else f"{to_kind(pct, 'float'):+.3f}%"
    text = f"total {fmt(o)} -> {fmt(n)} (delta {fmt(d, sign=True)}, {pct_text})"
    if fails:
        return GateResult(gate.model, str(gate), False, f"{text}: {'; '.join(fails)}")
    return GateResult(gate.model, str(gate), True, text)


def evaluate(gate: Gate, facts: ModelFacts) -> GateResult:
    """Checks one gate against one model's audit facts."""
    if gate.kind == "measure":
        return _measure(gate, facts)
    if gate.kind in ("removed_rows", "added_rows", "changed_rows"):
        value = {
            "removed_rows": facts.removed,
            "added_rows": facts.added,
            "changed_rows": facts.changed,
        }[gate.kind]
        assert gate.limit is not None
        ok = value <= gate.limit
        return GateResult(
            gate.model,
            str(gate),
            ok,
            f"{value:,} {gate.kind.replace('_', ' ')}" + ("" if ok else f" > {gate.limit:,}"),
        )
    if gate.kind == "changed_rows_per_partition":
        assert gate.limit is not None
        over = {p: n for p, n in facts.changed_per_partition.items() if n > gate.limit}
        worst = max(facts.changed_per_partition.values(), default=0)
        if over:
            shown = ", ".join(f"{p}: {n:,}" for p, n in list(over.items())[:5])
            more = f" and {len(over) - 5} more" if len(over) > 5 else ""
            return GateResult(
                gate.model,
                str(gate),
                False,
                f"{len(over)} partition(s) over {gate.limit:,} ({shown}{more})",
            )
        return GateResult(
            gate.model, str(gate), True, f"at most {worst:,} changed rows in a partition"
        )
    if gate.kind == "unchanged":
        unknown = [c for c in gate.columns if c not in facts.columns]
        if unknown:
            return GateResult(
                gate.model, str(gate), False, f"no column {', '.join(unknown)} in {gate.model}"
            )
        hit = {
            c: facts.column_changes.get(c, 0)
            for c in gate.columns
            if facts.column_changes.get(c, 0)
        }
        if hit:
            return GateResult(
                gate.model,
                str(gate),
                False,
                "changed: " + ", ".join(f"{c} in {n:,} row(s)" for c, n in hit.items()),
            )
        return GateResult(gate.model, str(gate), True, "no row changed them")
    if facts.schema_changes:
        return GateResult(
            gate.model, str(gate), False, "schema changed: " + "; ".join(facts.schema_changes)
        )
    return GateResult(gate.model, str(gate), True, "same columns and types")
