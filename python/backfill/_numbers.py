"""Measure values as the audit, the gates and the changelog carry them: exact where the column is.

A measure is summed as its column's kind (:func:`sum_kind`): ``integer`` sums are ``int``,
``decimal`` sums ``decimal.Decimal`` (every digit of the engine's DECIMAL/HUGEINT sum, never a
binary float), ``float`` sums ``float`` (approximate, and labelled so). Deltas are computed
exactly in a 100-digit context (the default 28 digits would round the sums of DECIMAL(38, s)
columns); percentages are computed from the exact values and rounded only when shown. JSON gets
decimals as strings with their exact digits (:func:`jsonable`).

>>> delta(Decimal("100.10"), Decimal("98.19")), fmt(Decimal("-1910.02"), sign=True)
(Decimal('-1.91'), '-1,910.02')
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

__all__ = [
    "Decimal",
    "Number",
    "delta",
    "fmt",
    "from_json",
    "is_exact",
    "jsonable",
    "kind_of",
    "pct",
    "pct_exact",
    "places",
    "sum_kind",
    "to_kind",
    "typed",
    "value_type",
]

Number = int | float | Decimal

#: kinds of measure sums (see the module doc)
INTEGER, DECIMAL, FLOAT = "integer", "decimal", "float"
# Enough digits for any difference of two 38-digit decimals, exactly.
_EXACT = decimal.Context(prec=100, traps=[decimal.InvalidOperation, decimal.Overflow])


def sum_kind(kinds: Iterable[str]) -> str:
    """The kind of a measure's sums from its column kinds on each side (``"integer"``,
    ``"decimal"``, ``"float"``; others are ignored): a float on either side makes it a float, else
    a decimal a decimal, else an integer (the C++ diff's rule)."""
    seen = set(kinds)
    if FLOAT in seen:
        return FLOAT
    return DECIMAL if DECIMAL in seen else INTEGER


def kind_of(value: Any) -> str:
    """The kind of one value (a float for anything not int or Decimal)."""
    if isinstance(value, Decimal):
        return DECIMAL
    if isinstance(value, int) and not isinstance(value, bool):
        return INTEGER
    return FLOAT


def is_exact(kind: str) -> bool:
    return kind != FLOAT


def to_kind(value: Any, kind: str) -> Number | None:
    """``value`` (int, float, Decimal, or a JSON string of a decimal) as a number of ``kind``:
    exact conversions for integer and decimal kinds."""
    if value is None:
        return None
    if isinstance(value, str):
        value = Decimal(value)
    if kind == FLOAT:
        return float(value)
    if kind == DECIMAL:
        if isinstance(value, float):  # (an engine that sent a float: its shortest repr)
            return Decimal(repr(value))
        return value if isinstance(value, Decimal) else Decimal(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else value
    return int(value) if isinstance(value, int) else value


def delta(old: Number | None, new: Number | None) -> Number | None:
    """``new - old`` (None when either is None), exact for ints and Decimals."""
    if old is None or new is None:
        return None
    if isinstance(old, float) or isinstance(new, float):
        return float(new) - float(old)
    if isinstance(old, Decimal) or isinstance(new, Decimal):
        return _EXACT.subtract(Decimal(new), Decimal(old))
    return new - old


def pct(old: Number | None, new: Number | None) -> float | None:
    """The change from ``old`` to ``new`` in percent of ``|old|``, computed from the exact values
    (None when old is 0 or missing)."""
    if old is None or new is None or old == 0:
        return None
    if isinstance(old, float) or isinstance(new, float):
        o, n = float(old), float(new)
        return (n - o) / abs(o) * 100.0 if math.isfinite(o) else None
    d = _EXACT.subtract(Decimal(new), Decimal(old))
    return float(_EXACT.multiply(_EXACT.divide(d, abs(Decimal(old))), Decimal(100)))


def pct_exact(old: Number | None, new: Number | None) -> Number | None:
    """As :func:`pct`, but a Decimal (to 100 digits) for exact values, for gates to compare
    with bounds exactly; a float for floats."""
    if old is None or new is None or old == 0:
        return None
    if isinstance(old, float) or isinstance(new, float):
        return pct(old, new)
    d = _EXACT.subtract(Decimal(new), Decimal(old))
    return _EXACT.multiply(_EXACT.divide(d, abs(Decimal(old))), Decimal(100))


def fmt(value: Number | None, *, sign: bool = False) -> str:
    """A value for people: exact decimals with every digit of their scale and thousands
    separators (``-1,910.02``), integers whole, floats to two places."""
    if value is None:
        return "null"
    plus = "+" if sign else ""
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        return format(value, f"{plus},.{places(value)}f")
    if isinstance(value, int):
        return format(value, f"{plus},")
    return format(value, f"{plus},.2f")


def places(value: Any) -> int:
    """Digits after the point of a Decimal (0 for anything else)."""
    if isinstance(value, Decimal) and value.is_finite():
        return max(0, -int(value.as_tuple().exponent))
    return 0


def value_type(kind: str, values: Iterable[Any]) -> str:
    """The changelog's ``value_type`` of a measure's values: ``integer``, ``float`` or
    ``decimal(38,S)`` with S the largest scale among ``values``."""
    if kind != DECIMAL:
        return kind
    return f"decimal(38,{max((places(v) for v in values), default=0)})"


def typed(value: Any, label: str | None) -> Number | None:
    """A value read back from the changelog as its ``value_type`` says: an int, a float, or a
    Decimal at its scale (an engine's fixed-scale column pads it with zeros)."""
    if value is None:
        return None
    if label == INTEGER:
        return int(value)
    if label == FLOAT or (label is None and isinstance(value, float)):
        return float(value)
    d = value if isinstance(value, Decimal) else Decimal(str(value))
    if label and label.startswith("decimal(") and "," in label:
        scale = int(label.rstrip(")").rsplit(",", 1)[1])
        return _EXACT.quantize(d, Decimal(1).scaleb(-scale))
    return d


def jsonable(value: Any) -> Any:
    """``value`` for JSON: a Decimal as a string of its exact digits; others unchanged."""
    return format(value, "f") if isinstance(value, Decimal) else value


def from_json(value: Any) -> Any:
    """The inverse of :func:`jsonable` for a measure value: a string is a Decimal."""
    return Decimal(value) if isinstance(value, str) else value
