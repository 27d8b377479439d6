"""The measure sums of a diff across engines (:func:`backfill.diff_tables`): summed in each
engine in its segment scan, merged with the streamed partitions' sums from the C++ diff, so the
result's sums, deltas and percentages per column and per partition are those that
:func:`backfill.diff` gives for the same rows.

Each side sums every measure in the scan that fingerprints its segments
(:func:`~backfill.engines.sql.canonical.segments_scan`), over the value as it would be streamed
(:func:`~backfill.engines.sql.canonical.streamed_value`): integers and decimals exactly (DuckDB's
HUGEINT and DECIMAL(38, s), PostgreSQL's numeric, read back as text, every digit), floats as the
engine's double. A partition whose fingerprints differ is streamed and takes the C++ diff's sums
(for exact measures equal to the engines'); a partition whose fingerprints are equal holds the
same rows on both sides and takes side ``a``'s sum as both old and new, with a delta of 0.

The kinds and types follow the C++ diff (``set_sum_kind`` and ``sum_column`` in
``cpp/src/diff.cpp``), read from the Arrow types the sides stream: a float on either side makes a
float measure, else a decimal one (at the larger scale) a decimal measure, else an integer one;
an integer sum is int64 unless a value of its column leaves that range (then decimal128(38, 0)),
a decimal sum decimal128(38, scale); in the per-column table the sums share one column as there.
A sum or delta beyond 38 digits is the C++ diff's error naming the measure. Percentages are
computed from the exact sums (:func:`backfill._numbers.pct`, 100 digits) where the C++ diff
divides in long double: the two can differ in the last bit of a double.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from .._numbers import DECIMAL, FLOAT, INTEGER, Number, pct
from ..errors import InvalidInputError

__all__ = ["MeasureSpec", "measure_specs", "measure_totals", "merged"]

_MAX_PRECISION = 38
_TOP = 10**_MAX_PRECISION - 1
_INT64 = (-(2**63), 2**63 - 1)
# Every digit of sums of 38-digit decimals (the default context's 28 would round them).
_CONTEXT = decimal.Context(prec=100, traps=[decimal.InvalidOperation, decimal.Overflow])
#: the per-partition table's columns before the measures' (the C++ diff's ``partitions_table``)
_PARTITION_COUNTS = (
    "partition",
    "start",
    "end",
    "rows_old",
    "rows_new",
    "added",
    "removed",
    "changed",
)


@dataclasses.dataclass(frozen=True)
class MeasureSpec:
    """How one measure is summed: ``kind`` (integer, decimal, float) and, for a decimal, the
    scale of its sums."""

    name: str
    kind: str
    scale: int = 0

    @property
    def exact(self) -> bool:
        return self.kind != FLOAT

    def value(self, raw: Any) -> Number:
        """An engine's sum (text of an exact sum, a float, or None for no value) as a sum of
        this measure: an int, a Decimal at the scale, or a float; 0 for None."""
        if self.kind == FLOAT:
            return 0.0 if raw is None else float(raw)
        exact = Decimal(0) if raw is None else Decimal(str(raw))
        unscaled = exact.scaleb(self.scale, context=_CONTEXT)
        if unscaled != unscaled.to_integral_value():
            raise InvalidInputError(
                f"measure {self.name!r}: an engine summed it to {exact}, finer than the scale "
                f"{self.scale} its values are streamed at"
            )
        _check(int(unscaled), self.name, "sum")
        if self.kind == INTEGER:
            return int(unscaled)
        return _at(int(unscaled), self.scale)

    def zero(self) -> Number:
        return 0.0 if self.kind == FLOAT else 0 if self.kind == INTEGER else _at(0, self.scale)


def _at(unscaled: int, scale: int) -> Decimal:
    return Decimal(unscaled).scaleb(-scale, context=_CONTEXT)


def _check(unscaled: int, measure: str, what: str) -> None:
    if abs(unscaled) > _TOP:
        raise InvalidInputError(
            f"the {what} of measure '{measure}' does not fit in 38 decimal digits (decimal128); "
            "exclude the column from the measures"
        )


def _domain(t: Any) -> tuple[str, int]:
    import pyarrow as pa  # type: ignore[import-untyped]

    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_floating(t):
        return FLOAT, 0
    if pa.types.is_decimal(t):
        return DECIMAL, int(t.scale)
    return INTEGER, 0


def measure_specs(names: Sequence[str], schema_a: Any, schema_b: Any) -> list[MeasureSpec]:
    """The spec of each measure from the Arrow types both sides stream it as (the C++ diff's
    ``set_sum_kind``)."""
    specs = []
    for name in names:
        (ka, sa), (kb, sb) = _domain(schema_a.field(name).type), _domain(schema_b.field(name).type)
        scale = max(0, sa, sb)
        kind = FLOAT if FLOAT in (ka, kb) else DECIMAL if DECIMAL in (ka, kb) else INTEGER
        # A scale that cannot be reached within 38 digits (negative scales) is summed as a float.
        if kind == DECIMAL and max(scale, scale - sa, scale - sb) > _MAX_PRECISION:
            kind = FLOAT
        specs.append(MeasureSpec(name, kind, scale if kind != FLOAT else 0))
    return specs


def _plus(a: Number, b: Number) -> Number:
    """``a + b`` of two sums of one kind (exact for ints and Decimals)."""
    if isinstance(a, float) or isinstance(b, float):
        return float(a) + float(b)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return Decimal(a) + Decimal(b)
    return a + b


def _unscaled(value: Number, scale: int) -> int:
    return int(Decimal(value).scaleb(scale, context=_CONTEXT))


def _sum_type(kind: str, scale: int, values: Sequence[Number | None]) -> Any:
    """The Arrow type of a column of sums (the C++ diff's ``sum_column``), after checking that
    every value fits in 38 digits."""
    import pyarrow as pa

    if kind == FLOAT:
        return pa.float64()
    unscaled = [_unscaled(v, scale) for v in values if v is not None]
    if kind == INTEGER and all(_INT64[0] <= u <= _INT64[1] for u in unscaled):
        return pa.int64()
    return pa.decimal128(_MAX_PRECISION, scale)


def _engine_partition(spec: MeasureSpec, old: Number, new: Number) -> dict[str, Any]:
    """A measure's columns of a partition from the engines' sums of its rows (``old``: a's)."""
    m = spec.name
    # NaN for an infinite float sum, as in C++
    delta: Number = float(new) - float(old) if spec.kind == FLOAT else _plus(new, -old)
    return {
        f"{m}_old": old,
        f"{m}_new": new,
        f"{m}_delta": delta,
        f"{m}_delta_pct": pct(old, new),
    }


EngineSums = tuple[Mapping[str, Number], Mapping[str, Number]]


def merged_partitions(
    streamed: Any,
    rows: Sequence[dict[str, Any]],
    engine: Sequence[EngineSums | None],
    specs: Sequence[MeasureSpec],
) -> Any:
    """The per-partition table: ``rows`` (the C++ diff's rows, ``streamed``'s, with the counts of
    the rows not streamed added, then the partitions none of whose rows were streamed: counts
    only), each row's measures from ``engine`` (None: the C++ diff's, of a partition streamed
    whole; else (a's, b's) sums of the partition's segment scans), sorted by start."""
    import pyarrow as pa

    out = []
    for base, sums in zip(rows, engine, strict=True):
        row = dict(base)
        if sums is not None:
            for spec in specs:
                row.update(_engine_partition(spec, sums[0][spec.name], sums[1][spec.name]))
        out.append(row)
    fields = [f for f in streamed.schema if f.name in _PARTITION_COUNTS]
    for spec in specs:
        m = spec.name
        for suffix in ("old", "new", "delta"):
            column = [r[f"{m}_{suffix}"] for r in out]
            fields.append(pa.field(f"{m}_{suffix}", _sum_type(spec.kind, spec.scale, column)))
        fields.append(pa.field(f"{m}_delta_pct", pa.float64()))
    table = pa.Table.from_pylist(out, schema=pa.schema(fields))
    return table.sort_by([("start", "ascending"), ("partition", "ascending")])


def merged_columns(
    streamed: Any,
    specs: Sequence[MeasureSpec],
    totals: Mapping[str, tuple[Number, Number]],
) -> Any:
    """The per-column table ``streamed`` (the C++ diff's, a pyarrow Table) with each measure's
    sums, delta and percentage taken from ``totals`` (measure -> exact (old, new) over every
    partition), in the one sum column the C++ diff shares between measures."""
    import pyarrow as pa

    by_name = {s.name: s for s in specs}
    all_exact = bool(specs) and all(s.exact for s in specs)
    all_integer = all_exact and all(s.kind == INTEGER for s in specs)
    scale = max((s.scale for s in specs), default=0)
    shared_kind = INTEGER if all_integer else DECIMAL if all_exact else FLOAT
    rows = streamed.to_pylist()
    for row in rows:
        spec = by_name.get(row["column"])
        if spec is None:
            continue
        old, new = totals[spec.name]
        if spec.exact:
            _check(_unscaled(old, spec.scale), spec.name, "sum")
            _check(_unscaled(new, spec.scale), spec.name, "sum")
            _check(_unscaled(new, spec.scale) - _unscaled(old, spec.scale), spec.name, "delta")
        if shared_kind == FLOAT:
            so, sn = float(old), float(new)
            row.update(sum_old=so, sum_new=sn, delta=sn - so)
        else:
            so_u, sn_u = _unscaled(old, scale), _unscaled(new, scale)
            for u in (so_u, sn_u, sn_u - so_u):
                _check(u, "sums", "sum")
            if shared_kind == INTEGER:
                row.update(sum_old=so_u, sum_new=sn_u, delta=sn_u - so_u)
            else:
                row.update(
                    sum_old=_at(so_u, scale),
                    sum_new=_at(sn_u, scale),
                    delta=_at(sn_u - so_u, scale),
                )
        row["pct_delta"] = pct(old, new)
    fields = []
    for f in streamed.schema:
        if f.name in ("sum_old", "sum_new", "delta"):
            f = pa.field(f.name, _sum_type(shared_kind, scale, [r[f.name] for r in rows]))
        fields.append(f)
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def merged(
    columns: Any,
    partitions: Any,
    rows: Sequence[dict[str, Any]],
    engine: Sequence[EngineSums | None],
    specs: Sequence[MeasureSpec],
    partitioned: bool,
    whole: EngineSums | None,
) -> tuple[Any, Any]:
    """The per-column and per-partition tables of a diff across engines from the C++ diff's of
    the streamed rows (``columns``, ``partitions``: pyarrow Tables). Partitioned: ``rows`` and
    ``engine`` as :func:`merged_partitions` takes them; the exact totals are the partitions'.
    One segment: ``whole``, its (a's, b's) sums from the segment scans."""
    with decimal.localcontext(_CONTEXT):
        totals: dict[str, tuple[Number, Number]] = {}
        cpp_totals = {r["column"]: (r["sum_old"], r["sum_new"]) for r in columns.to_pylist()}
        table = merged_partitions(partitions, rows, engine, specs) if partitioned else None
        # The C++ diff's float totals hold when it summed every partition it streamed whole.
        cpp_whole = partitioned and partitions.num_rows == sum(e is None for e in engine)
        for spec in specs:
            m = spec.name
            if table is not None and (spec.exact or not cpp_whole):
                old = sum(table.column(f"{m}_old").to_pylist(), spec.zero())
                new = sum(table.column(f"{m}_new").to_pylist(), spec.zero())
            elif table is not None:  # floats: the C++ diff's total plus the other partitions'
                old, new = (float(v) for v in cpp_totals[m])
                for sums in engine:
                    if sums is not None:
                        old, new = _plus(old, sums[0][m]), _plus(new, sums[1][m])
            elif whole is not None:
                old, new = whole[0][m], whole[1][m]
            else:
                old, new = cpp_totals[m]
            totals[m] = (old, new)
        return merged_columns(columns, specs, totals), table


def measure_totals(
    specs: Sequence[MeasureSpec],
    segment_sums: Sequence[tuple[Mapping[str, Number], Mapping[str, Number]]],
    columns: Any,
) -> dict[str, tuple[Number, Number]]:
    """measure -> (a's, b's) total at the measure's own kind and scale (the per-column table
    shares one type between measures): exact measures from the engines' segment sums (the
    streamed ones equal the C++ diff's), floats from ``columns`` (the result's table)."""
    shared = {r["column"]: (r["sum_old"], r["sum_new"]) for r in columns.to_pylist()}
    out: dict[str, tuple[Number, Number]] = {}
    with decimal.localcontext(_CONTEXT):
        for spec in specs:
            if spec.exact:
                out[spec.name] = (
                    sum((a[spec.name] for a, _ in segment_sums), spec.zero()),
                    sum((b[spec.name] for _, b in segment_sums), spec.zero()),
                )
            else:
                old, new = shared[spec.name]
                out[spec.name] = (float(old), float(new))
    return out
