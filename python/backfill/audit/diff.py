"""The audit diff: what a backfill changes, before it is published.

>>> r = backfill.diff(old, new, key="order_id", partition_by="ordered_at", tz="Europe/Berlin")
>>> r.summary.changed, r.columns.to_pandas(), r.partitions.to_pandas()   # doctest: +SKIP

``old`` and ``new`` are any Arrow-compatible tables (pyarrow, polars, pandas, DuckDB relations, or
any object with ``__arrow_c_stream__``); the comparison runs in C++ over their buffers. The rules
(null-safe equality, NaN == NaN, duplicates, tolerances, partitions) are documented at the top of
``cpp/include/backfill/diff.hpp``.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

from .. import _core
from .._arrow import ArrowTable, html_table
from .._numbers import fmt
from ..calendar import Grain
from ..errors import InvalidInputError

__all__ = ["DiffOptions", "DiffResult", "DiffStream", "DiffSummary", "diff", "diff_pairs"]

log = logging.getLogger(__name__)

ToleranceSpec = float | int | Mapping[str, float]
_HTML_MAX_COLUMNS = 100
_HTML_MAX_PARTITIONS = 400


def _names(value: str | Sequence[str] | None, what: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    names = list(value)
    for name in names:
        if not isinstance(name, str):
            raise InvalidInputError(f"{what} must be column names (str), got {name!r}")
    return names


def _tolerance(column: str, spec: object) -> tuple[float, float]:
    if isinstance(spec, bool) or spec is None:
        raise InvalidInputError(
            f"tolerance for {column!r} is {spec!r}; expected a number "
            "(absolute) or {'abs': ..., 'rel': ...}"
        )
    if isinstance(spec, (int, float)):
        return float(spec), 0.0
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"abs", "rel"}
        if unknown:
            raise InvalidInputError(
                f"tolerance for {column!r} has unknown keys "
                f"{sorted(unknown)}; expected 'abs' and/or 'rel'"
            )
        values = []
        for part in ("abs", "rel"):
            v = spec.get(part, 0.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise InvalidInputError(
                    f"tolerance for {column!r}: {part}={v!r} is not a number >= 0"
                )
            values.append(float(v))
        return values[0], values[1]
    raise InvalidInputError(
        f"tolerance for {column!r} is {spec!r}; expected a number "
        "(absolute) or {'abs': ..., 'rel': ...}"
    )


@dataclasses.dataclass(frozen=True)
class DiffSummary:
    """Row counts of a diff. ``identical`` means same schema and every row matched unchanged."""

    rows_old: int
    rows_new: int
    matched: int
    unchanged: int
    changed: int
    added: int
    removed: int
    duplicate_keys: int
    duplicate_rows_old: int
    duplicate_rows_new: int
    null_keys_old: int
    null_keys_new: int
    schema_changed: bool
    identical: bool

    def to_dict(self) -> dict[str, int | bool]:
        return dataclasses.asdict(self)


class DiffResult:
    """The result of :func:`diff`: a summary and Arrow tables (each with ``.to_pandas()``).

    * ``summary`` -- :class:`DiffSummary`;
    * ``schema`` -- added, removed and retyped columns;
    * ``columns`` -- per compared column: changed, null_to_value, value_to_null, max_abs_diff,
      and for measures sum_kind (integer, decimal, float), sum_old, sum_new, delta, pct_delta;
    * ``partitions`` -- per partition (with ``partition_by``): rows, added, removed, changed and
      per measure ``<m>_old``, ``<m>_new``, ``<m>_delta``, ``<m>_delta_pct``;

    Measure sums are exact for integer and decimal columns: int64 (Python ``int``) for integers,
    decimal128(38, s) (``decimal.Decimal``) for decimals at the larger scale of the two sides;
    float64 for float columns. In ``columns`` the sums share one column: decimal128 when every
    measure is exact, float64 when any is a float. Percentages come from the exact sums.
    * ``changed_sample`` (key, column, old, new), ``added_sample``, ``removed_sample``.

    The result itself exports the ``columns`` table through ``__arrow_c_stream__``.
    """

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.summary = DiffSummary(**raw["summary"])
        self.key: list[str] = list(raw["key"])
        self.measures: list[str] = list(raw["measures"])
        self.partition_by: str | None = raw["partition_by"]
        self.schema = ArrowTable(raw["schema"])
        self.columns = ArrowTable(raw["columns"])
        self.partitions = ArrowTable(raw["partitions"])
        self.changed_sample = ArrowTable(raw["changed_sample"])
        self.added_sample = ArrowTable(raw["added_sample"])
        self.removed_sample = ArrowTable(raw["removed_sample"])
        #: wall seconds of the engine's phases (scan old, scan new, match, columns, results)
        self.timings: dict[str, float] = dict(raw.get("timings", []))

    @property
    def identical(self) -> bool:
        return self.summary.identical

    def __bool__(self) -> bool:  # "if diff(...):" reads as "if there are differences"
        return not self.summary.identical

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.columns.__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        """The per-column table as a pandas DataFrame."""
        return self.columns.to_pandas()

    def changed_columns(self) -> dict[str, int]:
        """Column -> number of matched rows in which it changed (only columns that changed)."""
        names, counts = self.columns["column"], self.columns["changed"]
        return {n: c for n, c in zip(names, counts, strict=True) if c}

    # -- text ----------------------------------------------------------------------------------
    def __str__(self) -> str:
        s = self.summary
        verdict = "identical" if s.identical else "DIFFERENT"
        lines = [
            f"diff on key ({', '.join(self.key)}): {verdict}",
            f"  rows: {s.rows_old:,} old, {s.rows_new:,} new; matched {s.matched:,} "
            f"(unchanged {s.unchanged:,}, changed {s.changed:,}); added {s.added:,}; "
            f"removed {s.removed:,}",
        ]
        if s.duplicate_keys or s.null_keys_old or s.null_keys_new:
            lines.append(
                f"  excluded: {s.duplicate_keys:,} duplicated keys ({s.duplicate_rows_old:,} old "
                f"rows, {s.duplicate_rows_new:,} new rows); null keys {s.null_keys_old:,} old, "
                f"{s.null_keys_new:,} new"
            )
        for row in self.schema.to_pylist():
            types = " -> ".join(t for t in (row["old_type"], row["new_type"]) if t)
            note = "" if row["compared"] is not False else " (not compared)"
            lines.append(f"  schema: {row['column']} {row['change']} ({types}){note}")
        changed = self.changed_columns()
        if changed:
            lines.append(
                "  changed columns: " + ", ".join(f"{c} {n:,}" for c, n in changed.items())
            )
        for row in self.columns.to_pylist():
            if row["sum_old"] is None:
                continue
            pct = "" if row["pct_delta"] is None else f" ({row['pct_delta']:+.3g}%)"
            lines.append(
                f"  measure {row['column']}: {_num(row['sum_old'])} -> "
                f"{_num(row['sum_new'])}, delta {_num(row['delta'])}{pct}"
            )
        if self.partitions.num_rows:
            touched = [
                p for p in self.partitions.to_pylist() if p["added"] or p["removed"] or p["changed"]
            ]
            lines.append(
                f"  partitions ({self.partition_by}): {self.partitions.num_rows} seen, "
                f"{len(touched)} with differences"
            )
            for p in touched[:10]:
                lines.append(
                    f"    {p['partition']}: +{p['added']:,} -{p['removed']:,} ~{p['changed']:,}"
                )
            if len(touched) > 10:
                lines.append(f"    ... {len(touched) - 10} more")
        return "\n".join(lines)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<DiffResult {'identical' if s.identical else 'different'}: "
            f"{s.changed} changed, {s.added} added, {s.removed} removed of "
            f"{s.rows_old} old / {s.rows_new} new rows>"
        )

    # -- HTML ----------------------------------------------------------------------------------
    def _repr_html_(self) -> str | None:
        if (
            self.columns.num_rows > _HTML_MAX_COLUMNS
            or self.partitions.num_rows > _HTML_MAX_PARTITIONS
        ):
            return None
        s = self.summary.to_dict()
        parts = [
            "<div class='backfill-diff'>",
            html_table(list(s), [[str(v) for v in s.values()]], caption="summary"),
        ]
        if self.schema.num_rows:
            sh = self.schema._repr_html_()
            if sh:
                parts.append(sh)
        col_html = self.columns._repr_html_()
        if col_html:
            parts.append(col_html)
        for measure in self.measures[:4]:
            svg = self._delta_svg(measure)
            if svg:
                parts.append(svg)
        parts.append("</div>")
        return "".join(parts)

    def _delta_svg(self, measure: str, width: int = 640, height: int = 160) -> str | None:
        """Bars of the measure's delta per partition (plain SVG), or None without partitions."""
        rows = [r for r in self.partitions.to_pylist() if r["partition"] is not None]
        if not rows:
            return None
        deltas = [float(r[f"{measure}_delta"] or 0.0) for r in rows]  # for drawing only
        top = max((abs(d) for d in deltas if math.isfinite(d)), default=0.0) or 1.0
        bar = width / len(rows)
        mid = height / 2
        shapes = [f"<line x1='0' y1='{mid}' x2='{width}' y2='{mid}' stroke='#888'/>"]
        for i, (r, d) in enumerate(zip(rows, deltas, strict=True)):
            if not math.isfinite(d):
                continue
            h = abs(d) / top * (mid - 4)
            y = mid - h if d >= 0 else mid
            color = "#2a7" if d >= 0 else "#c33"
            title = html.escape(f"{r['partition']}: {measure} {_num(d)}")
            shapes.append(
                f"<rect x='{i * bar:.2f}' y='{y:.2f}' width='{max(bar - 1, 1):.2f}' "
                f"height='{h:.2f}' fill='{color}'><title>{title}</title></rect>"
            )
        caption = html.escape(
            f"{measure}: delta (new - old) per partition, "
            f"{rows[0]['partition']} .. {rows[-1]['partition']}"
        )
        return (
            f"<figure><svg xmlns='http://www.w3.org/2000/svg' width='{width}' "
            f"height='{height}' role='img'>{''.join(shapes)}</svg>"
            f"<figcaption>{caption}</figcaption></figure>"
        )

    def plot(self, measure: str | None = None, ax: Any = None) -> Any:
        """Old vs new sums of ``measure`` per partition (matplotlib; returns the Axes)."""
        if not self.partitions.num_rows:
            raise InvalidInputError(
                "plot needs a per-partition breakdown: pass partition_by= to diff"
            )
        if measure is None:
            if not self.measures:
                raise InvalidInputError("this diff has no measures to plot")
            measure = self.measures[0]
        if measure not in self.measures:
            raise InvalidInputError(
                f"{measure!r} is not a measure of this diff (measures: "
                f"{', '.join(self.measures) or 'none'})"
            )
        plt = importlib.import_module("matplotlib.pyplot")
        rows = [r for r in self.partitions.to_pylist() if r["partition"] is not None]
        labels = [r["partition"] for r in rows]
        if ax is None:
            _, ax = plt.subplots(figsize=(max(6.0, len(rows) * 0.25), 3.5))
        ax.plot(labels, [r[f"{measure}_old"] for r in rows], label="old", marker="o")
        ax.plot(labels, [r[f"{measure}_new"] for r in rows], label="new", marker="x")
        ax.set_title(f"{measure} per {self.partition_by} partition")
        ax.legend()
        ax.tick_params(axis="x", labelrotation=90)
        return ax


def _num(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, (int, Decimal)) and not isinstance(v, bool):
        return fmt(v)
    return f"{v:,.6g}"


@dataclasses.dataclass(frozen=True)
class DiffOptions:
    """How :func:`diff` and :class:`DiffStream` compare: every argument but the inputs and the
    key, with their defaults (documented at :func:`diff`), checked once by :meth:`core_kwargs`."""

    columns: Sequence[str] | None = None
    exclude: Sequence[str] | None = None
    partition_by: str | None = None
    grain: Grain = "day"
    tz: str = "UTC"
    tolerance: Mapping[str, ToleranceSpec] | None = None
    measures: Sequence[str] | None = None
    sample: int = 10
    on_duplicate: Literal["error", "report"] = "error"
    threads: int = 0

    def core_kwargs(self, key: str | Sequence[str]) -> dict[str, Any]:
        """The C++ diff's keyword arguments, validated."""
        keys = _names(key, "key")
        assert keys is not None
        per_column: dict[str, tuple[float, float]] = {}
        default: tuple[float, float] | None = None
        for column, spec in (self.tolerance or {}).items():
            if column == "__default__":
                default = _tolerance(column, spec)
            else:
                per_column[column] = _tolerance(column, spec)
        if isinstance(self.sample, bool) or not isinstance(self.sample, int):
            raise InvalidInputError(f"sample={self.sample!r}; expected a number of rows")
        return {
            "key": keys,
            "columns": _names(self.columns, "columns"),
            "exclude": _names(self.exclude, "exclude") or [],
            "partition_by": self.partition_by,
            "grain": self.grain,
            "tz": self.tz,
            "tolerance": per_column,
            "default_tolerance": default,
            "measures": _names(self.measures, "measures"),
            "sample": self.sample,
            "on_duplicate": self.on_duplicate,
            "threads": self.threads,
        }


# The documented keyword API, as pandas.merge's: a caller names the options it sets, and help() and
# a typo's TypeError list them. They are gathered into one DiffOptions at once, so the rule's
# concern (a function doing many things with many inputs) does not apply.
def diff(  # noqa: PLR0913
    old: Any,
    new: Any,
    key: str | Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    partition_by: str | None = None,
    grain: Grain = "day",
    tz: str = "UTC",
    tolerance: Mapping[str, ToleranceSpec] | None = None,
    measures: Sequence[str] | None = None,
    sample: int = 10,
    on_duplicate: Literal["error", "report"] = "error",
    threads: int = 0,
) -> DiffResult:
    """Compares two versions of a table matched on ``key``.

    ``tolerance`` maps columns to a number (absolute) or ``{"abs": a, "rel": r}``: values pass
    when ``|new - old| <= abs + rel * |old|``; ``"__default__"`` applies to every other numeric
    compared column. ``measures`` (default: numeric compared columns) get old/new sums and deltas
    overall and per partition of ``partition_by`` (a date/timestamp column) at ``grain`` in
    ``tz``. ``on_duplicate="error"`` raises on a duplicated key; ``"report"`` counts and skips
    them. ``threads=0`` uses every core. Inputs already sorted by an integer or date key, one column
    or several (strictly ascending, lexicographically; no nulls) are matched by merging them in
    order and comparing their columns directly, several times faster; any other
    input is matched through hash tables, with the same result (``timings`` shows ``merge`` or
    ``match``).
    """
    kwargs = DiffOptions(
        columns=columns,
        exclude=exclude,
        partition_by=partition_by,
        grain=grain,
        tz=tz,
        tolerance=tolerance,
        measures=measures,
        sample=sample,
        on_duplicate=on_duplicate,
        threads=threads,
    ).core_kwargs(key)
    raw = _core.diff(old, new, **kwargs)
    result = DiffResult(raw)
    log.debug(
        "diff on %s: %r; phases %s",
        kwargs["key"],
        result,
        ", ".join(f"{k} {v:.3f}s" for k, v in result.timings.items()),
    )
    return result


class DiffStream:
    """:func:`diff` over (old part, new part) pairs fed one at a time, so memory follows the
    largest pair (plus the rows unmatched in their own pair, and each side's keys delta-coded:
    ~1 byte per dense integer id, ~7 per hashed key) rather than the whole inputs:

    >>> s = DiffStream(key="order_id", partition_by="ordered_at")         # doctest: +SKIP
    >>> for old_part, new_part in pairs:                                   # doctest: +SKIP
    ...     s.add(old_part, new_part)        # each pair can be released after add
    >>> result = s.finish()                  # None: diff the whole inputs  # doctest: +SKIP

    The result equals ``diff(concat(old parts), concat(new parts), ...)``: keys that move
    between pairs match at the end, row order (hence samples) runs across the pairs in order;
    float sums are added pair by pair (deterministic, equal up to rounding). A duplicated key
    cannot be settled a pair at a time (it excludes that key's rows in every pair): then
    :attr:`whole_needed` turns true (a duplicate inside a pair; further pairs are skipped) or
    :meth:`finish` returns None (a key recurring across pairs), and the caller diffs the whole
    inputs, which raises or reports the duplicates as usual. The arguments are :func:`diff`'s.
    """

    # diff()'s keyword API (see there for why it keeps its keywords).
    def __init__(  # noqa: PLR0913
        self,
        key: str | Sequence[str],
        *,
        columns: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        partition_by: str | None = None,
        grain: Grain = "day",
        tz: str = "UTC",
        tolerance: Mapping[str, ToleranceSpec] | None = None,
        measures: Sequence[str] | None = None,
        sample: int = 10,
        on_duplicate: Literal["error", "report"] = "error",
        threads: int = 0,
    ) -> None:
        options = DiffOptions(
            columns=columns,
            exclude=exclude,
            partition_by=partition_by,
            grain=grain,
            tz=tz,
            tolerance=tolerance,
            measures=measures,
            sample=sample,
            on_duplicate=on_duplicate,
            threads=threads,
        )
        self._stream = _core.DiffStream(**options.core_kwargs(key))

    def add(self, old: Any, new: Any) -> None:
        """Diffs one pair of Arrow-compatible parts (same schema per side as the first pair)."""
        self._stream.add(old, new)

    @property
    def whole_needed(self) -> bool:
        """True once a pair held a duplicated key: stop feeding and diff the whole inputs."""
        return bool(self._stream.whole_needed)

    @property
    def pairs(self) -> int:
        """Pairs added so far."""
        return int(self._stream.pairs)

    @property
    def carried(self) -> tuple[int, int]:
        """Rows (old, new) unmatched in their own pair, held until :meth:`finish`."""
        old, new = self._stream.carried
        return int(old), int(new)

    def finish(self) -> DiffResult | None:
        """The merged result, or None when the whole inputs must be diffed (duplicated keys)."""
        raw = self._stream.finish()
        if raw is None:
            return None
        result = DiffResult(raw)
        log.debug("streamed diff of %d pairs: %r", self.pairs, result)
        return result


def diff_pairs(
    pairs: Iterable[tuple[Any, Any]], key: str | Sequence[str], **options: Any
) -> DiffResult | None:
    """:class:`DiffStream` over ``pairs`` (stopping early when :attr:`DiffStream.whole_needed`);
    None when the whole inputs must be diffed at once."""
    stream = DiffStream(key, **options)
    for old, new in pairs:
        stream.add(old, new)
        if stream.whole_needed:
            return None
    return stream.finish()
