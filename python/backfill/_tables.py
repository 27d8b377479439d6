"""Row tables for result objects: Arrow export, pandas, text and HTML from a list of rows.

pyarrow and pandas are imported only when a caller asks for Arrow or a DataFrame.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._arrow import html_table

_HTML_MAX_ROWS = 500


class RowTable:
    """Named columns over a list of row tuples; exports Arrow (``__arrow_c_stream__``)."""

    def __init__(
        self, columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = ""
    ) -> None:
        self.columns = list(columns)
        self.rows = [tuple(r) for r in rows]
        self.caption = caption

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def to_pylist(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]

    def to_arrow(self) -> Any:
        import pyarrow as pa  # type: ignore[import-untyped]

        return pa.table({c: [r[i] for r in self.rows] for i, c in enumerate(self.columns)})

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        import pandas as pd  # type: ignore[import-untyped]

        return pd.DataFrame(self.rows, columns=self.columns)

    def __str__(self) -> str:
        text = [[_show(v) for v in r] for r in self.rows[:40]]
        widths = [max([len(c), *(len(r[i]) for r in text)]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in text]
        if len(self.rows) > 40:
            lines.append(f"... {len(self.rows) - 40} more rows")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<RowTable {len(self.rows)} rows: {', '.join(self.columns)}>"

    def _repr_html_(self) -> str | None:
        if len(self.rows) > _HTML_MAX_ROWS:
            return None
        return html_table(
            self.columns, [[_show(v) for v in r] for r in self.rows], caption=self.caption
        )


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.6g}"
    return str(value)
