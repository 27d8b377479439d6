"""``ArrowTable``: the result table every backfill API returns.

It wraps an Arrow record batch owned by the C++ core. Any Arrow consumer reads it zero-copy through
the PyCapsule interface (``pyarrow.table(t)``, ``polars.from_arrow(t)``,
``duckdb.sql("... from t")``); without pyarrow, ``to_pylist()``, ``to_pydict()`` and
``t["column"]`` give plain Python values.

>>> t = backfill.diff(old, new, key="id").columns      # doctest: +SKIP
>>> t.to_pandas()                                       # doctest: +SKIP
"""

from __future__ import annotations

import html
import importlib
from collections.abc import Iterator, Sequence
from typing import Any

from . import _core

__all__ = ["ArrowTable"]

# Beyond these sizes the HTML repr returns None and Jupyter falls back to the text repr.
_HTML_MAX_ROWS = 200
_HTML_MAX_COLUMNS = 50
_TEXT_ROWS = 10


class ArrowTable:
    """An immutable Arrow table (one record batch) with Python-friendly accessors."""

    __slots__ = ("_core",)

    def __init__(self, core: _core.ArrowTable) -> None:
        if not isinstance(core, _core.ArrowTable):
            raise TypeError(f"ArrowTable wraps a backfill._core.ArrowTable, got {type(core)!r}")
        self._core = core

    @classmethod
    def from_arrow(cls, data: Any) -> ArrowTable:
        """Copies any Arrow-compatible object (``__arrow_c_stream__``/``__arrow_c_array__``)."""
        return cls(_core.arrow_copy(data))

    # -- shape ---------------------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        return self._core.num_rows

    @property
    def num_columns(self) -> int:
        return self._core.num_columns

    @property
    def column_names(self) -> list[str]:
        return list(self._core.column_names)

    @property
    def types(self) -> dict[str, str]:
        """Column name -> Arrow type, e.g. ``{"id": "int64", "at": "timestamp[us, tz=UTC]"}``."""
        return dict(zip(self._core.column_names, self._core.types, strict=True))

    def __len__(self) -> int:
        return self._core.num_rows

    # -- values --------------------------------------------------------------------------------
    def column(self, key: str | int) -> list[Any]:
        """The values of one column as Python objects (``None`` for nulls)."""
        return self._core.column(key)

    def __getitem__(self, key: str | int) -> list[Any]:
        return self._core.column(key)

    def to_pydict(self) -> dict[str, list[Any]]:
        return {name: self._core.column(i) for i, name in enumerate(self._core.column_names)}

    def to_pylist(self) -> list[dict[str, Any]]:
        """One dict per row."""
        names = self._core.column_names
        columns = [self._core.column(i) for i in range(len(names))]
        return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.to_pylist())

    # -- Arrow interop -------------------------------------------------------------------------
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self._core.__arrow_c_stream__(requested_schema)

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` (zero-copy; needs pyarrow)."""
        return importlib.import_module("pyarrow").table(self)

    def to_pandas(self) -> Any:
        """A pandas DataFrame, through pyarrow when it is installed (else from Python values)."""
        try:
            importlib.import_module("pyarrow")
        except ImportError:
            pd = importlib.import_module("pandas")
            return pd.DataFrame(self.to_pydict(), columns=self.column_names)
        return self.to_arrow().to_pandas()

    def to_polars(self) -> Any:
        """A polars DataFrame (zero-copy; needs polars)."""
        return importlib.import_module("polars").DataFrame(self)

    # -- display -------------------------------------------------------------------------------
    def _rows_as_text(self, limit: int) -> list[list[str]]:
        columns = [self._core.column(i) for i in range(self.num_columns)]
        shown = min(limit, self.num_rows)
        return [[_show(col[r]) for col in columns] for r in range(shown)]

    def __str__(self) -> str:
        names = self.column_names
        rows = self._rows_as_text(_TEXT_ROWS)
        widths = [len(n) for n in names]
        for row in rows:
            widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
        cap = [min(w, 40) for w in widths]
        lines = ["  ".join(n[:c].ljust(c) for n, c in zip(names, cap, strict=True))]
        lines.append("  ".join("-" * c for c in cap))
        for row in rows:
            lines.append("  ".join(_clip(v, c).ljust(c) for v, c in zip(row, cap, strict=True)))
        if self.num_rows > len(rows):
            lines.append(f"... {self.num_rows - len(rows)} more rows")
        return "\n".join(lines)

    def __repr__(self) -> str:
        schema = ", ".join(f"{n}: {t}" for n, t in self.types.items())
        head = f"ArrowTable({self.num_rows} rows; {schema})"
        return head if self.num_columns == 0 else head + "\n" + str(self)

    def _repr_html_(self) -> str | None:
        if self.num_rows > _HTML_MAX_ROWS or self.num_columns > _HTML_MAX_COLUMNS:
            return None
        return html_table(
            self.column_names, self._rows_as_text(self.num_rows), caption=f"{self.num_rows} rows"
        )


def html_table(names: Sequence[str], rows: Sequence[Sequence[str]], *, caption: str = "") -> str:
    """A plain HTML table (escaped), shared by the result objects' ``_repr_html_``."""
    parts = ["<table>"]
    if caption:
        parts.append(f"<caption>{html.escape(caption)}</caption>")
    parts.append(
        "<thead><tr>"
        + "".join(f"<th>{html.escape(n)}</th>" for n in names)
        + "</tr></thead><tbody>"
    )
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
