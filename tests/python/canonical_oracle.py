"""The canonical row encoding (backfill.engines.sql.canonical) written again in plain Python, from
its documentation, as the oracle of the SQL that every engine runs: exact tokens from
``fractions``/``decimal``/``hashlib``, nothing shared with the SQL."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def float_token(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    _, e = math.frexp(abs(x))  # |x| = m * 2^e with 0.5 <= m < 1: the binary exponent is e - 1
    k = max(e - 1, -1022) - 52
    m = Fraction(abs(x)) / Fraction(2) ** k
    assert m.denominator == 1 and m < 2**53, (x, m)
    return ("-" if x < 0 else "") + f"{m.numerator}p{k}"


def exact_token(v: int | Decimal) -> str:
    text = format(Decimal(v), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def token(v: Any, encoding: str) -> str:
    if v is None:
        return "~"
    if encoding == "float":
        return float_token(float(v))
    if encoding == "exact":
        return exact_token(v)
    if encoding == "string":
        return f"{len(v.encode('utf-8'))}:{v}"
    if encoding == "boolean":
        return "t" if v else "f"
    if encoding == "date":
        return str((v - dt.date(1970, 1, 1)).days)
    assert encoding == "timestamp"
    aware = v if v.tzinfo is not None else v.replace(tzinfo=dt.timezone.utc)
    return str((aware - _EPOCH) // dt.timedelta(microseconds=1))


def row_hash(row: Mapping[str, Any], encodings: Mapping[str, str]) -> int:
    text = "|".join(token(row[c], encodings[c]) for c in sorted(encodings))
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[:16], 16)


def fingerprint(rows: Sequence[Mapping[str, Any]], encodings: Mapping[str, str]) -> tuple[int, int]:
    """(row count, sum of row hashes mod 2^64) of ``rows``."""
    return len(rows), sum(row_hash(r, encodings) for r in rows) % (1 << 64)
