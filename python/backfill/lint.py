"""SQL lint for backfill hazards: logic that breaks idempotency, reads that ignore the run's period.

A backfill is safe when a model gives the same result every time it runs for a period. The lint
finds, before anything runs, what breaks that (rule codes):

``CLOCK_READ`` (error)
    ``now()``, ``current_date``, ``getdate()``, ``sysdate``, ``{{ run_started_at }}``,
    ``{{ modules.datetime.datetime.now() }}``, Postgres ``'now'::timestamp``... A run for August
    would use today's date. Use the run parameters ``{{ start }}`` / ``{{ end }}``.
``NONDETERMINISTIC`` (error; warning for LIMIT and unordered aggregates)
    ``random()``, ``uuid()``, ``gen_random_uuid()``, ``newid()``, ``nextval()``,
    ``{{ invocation_id }}``,
    ``row_number()``/``lag()``/... ``OVER`` a window without ``ORDER BY``, ``DISTINCT ON`` and
    ``LIMIT`` without ``ORDER BY``, ``array_agg``/``string_agg``/``listagg`` without an order,
    sampling without a seed.
``UNBOUNDED_READ`` (warning)
    A statement that reads one of ``partitioned_inputs`` (``ref('m')``, ``source('s', 't')`` or a
    table after FROM/JOIN) without referring to the run's period (``{{ start }}``, ``{{ end }}``,
    ``var('start')``, ``$start``, ``:start``, ``@start``, ``${start}``). Under dbt microbatch
    (``microbatch=True``, or ``config(incremental_strategy='microbatch')`` in the model), dbt
    filters ``ref()``/``source()`` itself, except ``ref('m').render()``.
``APPEND_ONLY`` (error)
    ``INSERT INTO t`` with no earlier ``DELETE FROM t`` / ``TRUNCATE t`` / ``CREATE OR REPLACE t``
    in the model and no ``ON CONFLICT`` / ``REPLACE WHERE``: a re-run doubles the period's rows.
``LINT_PARSE`` (error)
    Unterminated strings, quoted names, comments, dollar strings and Jinja blocks; unbalanced
    ``{% if %}``/``{% endif %}``; control bytes; invalid UTF-8. The lint never raises on bad SQL.

The SQL is tokenized (never searched with regular expressions): ``'now()'`` in a string, a
comment or a quoted name ``"now"`` is not a finding, while ``'{{ run_started_at }}'`` is (Jinja
renders before the SQL runs; a ``{{ }}`` inside a SQL comment renders into the comment and is
inert, a ``{% %}`` there still executes). SQL in Jinja string arguments of dbt macros
(``dbt.dateadd(..., "current_date")``) is checked too. Dialects: duckdb, postgres, snowflake,
bigquery, spark; function names that read the clock or randomness wherever they exist are flagged
in every dialect, the dialect adds its own forms (Snowflake's bare ``sysdate``, Postgres'
``'now'::timestamp``, ``seq.nextval``, ``USING SAMPLE``) and its quoting and comment rules.

Positions: ``line`` and ``column`` are 1-based; lines end at ``\\n``, ``\\r\\n`` or ``\\r``;
**columns count Unicode code points** (a tab is one column, an invalid UTF-8 byte one column), so
they match Python string indexing within the line. ``offset`` and ``length`` are UTF-8 bytes.

Switching rules off, always with a reason that stays visible:

* per model: ``ignore={"CLOCK_READ": "loaded_at is audit metadata, excluded from comparison"}``;
* inline: a comment ``-- backfill: ignore CLOCK_READ <reason>`` at the end of a line covers that
  line; on a line of its own it covers the next line of code; ``backfill: ignore-file CODE
  <reason>`` covers the whole model. Several codes: ``ignore CLOCK_READ,NONDETERMINISTIC``.

Suppressed findings are not dropped: they are in ``result.suppressed`` (and in ``to_dicts()``,
``to_pandas()``, Arrow and the text output) with their reason; iterating a :class:`LintResult`
yields the active ones.

>>> r = lint_sql("select id, now() as loaded_at from orders")
>>> [(f.code, f.line, f.column, f.text) for f in r]
[('CLOCK_READ', 1, 12, 'now()')]
>>> print(r[0])
<sql>:1:12: CLOCK_READ error: now() reads the clock: a backfill run for a past period would use
today's date or time
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, overload

from . import _core
from .errors import InvalidInputError

logger = logging.getLogger(__name__)

DIALECTS: tuple[str, ...] = ("duckdb", "postgres", "snowflake", "bigquery", "spark")
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")
RULES: Mapping[str, str] = {
    "CLOCK_READ": "reads the clock (now(), current_date, {{ run_started_at }})",
    "NONDETERMINISTIC": "differs between runs (random(), uuid(), row_number() without ORDER BY)",
    "UNBOUNDED_READ": "reads a partitioned input without restricting it to the run's period",
    "APPEND_ONLY": "INSERT INTO without deleting or overwriting the period first",
    "LINT_PARSE": "the SQL or Jinja could not be tokenized (unterminated, unbalanced, binary)",
}
_HTML_MAX_ROWS = 500

IgnoreSpec = Mapping[str, str] | Iterable[str | tuple[str, str]] | str | None


@dataclass(frozen=True)
class Finding:
    """One problem: where it is, what it is, and how to fix it."""

    code: str
    severity: str
    line: int
    column: int
    text: str
    message: str
    hint: str
    offset: int = 0
    length: int = 0
    suppressed: bool = False
    reason: str = ""
    path: str | None = None

    @property
    def location(self) -> str:
        return f"{self.path or '<sql>'}:{self.line}:{self.column}"

    def format(self) -> str:
        """``file:line:col: CODE severity: message`` (suppressed: ``CODE suppressed (reason)``)."""
        if self.suppressed:
            why = self.reason or "no reason given"
            return f"{self.location}: {self.code} suppressed ({why}): {self.message}"
        return f"{self.location}: {self.code} {self.severity}: {self.message}"

    def __str__(self) -> str:
        return self.format()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InputRead:
    """An input the model reads: ``ref('m')``, ``source('s', 't')`` or a table name."""

    kind: str  # "ref", "source" or "table"
    name: str
    line: int
    column: int
    offset: int


@dataclass(frozen=True)
class Token:
    """A token of SQL or Jinja. Tokens tile the input; offsets and lengths are in UTF-8 bytes."""

    kind: str
    offset: int
    length: int
    line: int
    column: int
    text: str


_COLUMNS: tuple[str, ...] = tuple(Finding.__dataclass_fields__)


class LintResult(Sequence[Finding]):
    """The findings for one model. A sequence of the active (unsuppressed) findings."""

    def __init__(
        self,
        findings: Iterable[Finding],
        *,
        inputs: Iterable[InputRead] = (),
        config: Mapping[str, str] | None = None,
        path: str | None = None,
    ) -> None:
        self.all: tuple[Finding, ...] = tuple(findings)
        self.findings: tuple[Finding, ...] = tuple(f for f in self.all if not f.suppressed)
        self.suppressed: tuple[Finding, ...] = tuple(f for f in self.all if f.suppressed)
        self.inputs: tuple[InputRead, ...] = tuple(inputs)
        self.config: dict[str, str] = dict(config or {})
        self.path = path

    @overload
    def __getitem__(self, index: int) -> Finding: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Finding]: ...
    def __getitem__(self, index: int | slice) -> Finding | Sequence[Finding]:
        return self.findings[index]

    def __len__(self) -> int:
        return len(self.findings)

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.findings)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when no active finding is an error."""
        return not self.errors

    def codes(self) -> list[str]:
        """The codes of the active findings, in order (handy in tests and scripts)."""
        return [f.code for f in self.findings]

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every finding, suppressed ones included (``suppressed``/``reason`` columns)."""
        return [f.to_dict() for f in self.all]

    def to_pandas(self) -> Any:
        """A pandas DataFrame of every finding (needs pandas)."""
        import pandas as pd  # type: ignore[import-untyped]

        return pd.DataFrame(self.to_dicts(), columns=list(_COLUMNS))

    def to_arrow(self) -> Any:
        """A pyarrow Table of every finding (needs pyarrow)."""
        import pyarrow as pa  # type: ignore[import-untyped]

        schema = pa.schema(
            [
                ("code", pa.string()),
                ("severity", pa.string()),
                ("line", pa.int64()),
                ("column", pa.int64()),
                ("text", pa.string()),
                ("message", pa.string()),
                ("hint", pa.string()),
                ("offset", pa.int64()),
                ("length", pa.int64()),
                ("suppressed", pa.bool_()),
                ("reason", pa.string()),
                ("path", pa.string()),
            ]
        )
        return pa.Table.from_pylist(self.to_dicts(), schema=schema)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    def summary(self) -> str:
        parts = []
        for n, word in (
            (len(self.errors), "error"),
            (len(self.warnings), "warning"),
            (len(self.findings) - len(self.errors) - len(self.warnings), "info"),
            (len(self.suppressed), "suppressed"),
        ):
            if n:
                parts.append(f"{n} {word}" + ("s" if n != 1 and word != "suppressed" else ""))
        return ", ".join(parts) if parts else "no findings"

    def __str__(self) -> str:
        lines = []
        for f in self.all:
            lines.append(f.format())
            if not f.suppressed and f.hint:
                lines.append(f"    hint: {f.hint}")
        lines.append(self.summary())
        return "\n".join(lines)

    def __repr__(self) -> str:
        where = f" {self.path!r}" if self.path else ""
        return f"<LintResult{where}: {self.summary()}>"

    def _repr_html_(self) -> str | None:
        if len(self.all) > _HTML_MAX_ROWS:
            return None
        colors = {"error": "#b00020", "warning": "#a15c00", "info": "#555"}
        rows = []
        for f in self.all:
            sev = "suppressed" if f.suppressed else f.severity
            color = "#888" if f.suppressed else colors.get(f.severity, "#000")
            note = (
                f"<br><i>suppressed: {html.escape(f.reason or 'no reason given')}</i>"
                if f.suppressed
                else f"<br><small>{html.escape(f.hint)}</small>"
            )
            rows.append(
                f"<tr><td>{f.line}:{f.column}</td>"
                f"<td style='color:{color}'><b>{html.escape(f.code)}</b><br>{sev}</td>"
                f"<td><code>{html.escape(f.text)}</code></td>"
                f"<td>{html.escape(f.message)}{note}</td></tr>"
            )
        title = html.escape(self.path or "lint")
        return (
            f"<div><b>{title}</b>: {html.escape(self.summary())}"
            "<table><thead><tr><th>line:col</th><th>rule</th><th>text</th><th>message</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        )


def _ignore_pairs(ignore: IgnoreSpec) -> list[tuple[str, str]]:
    if ignore is None:
        return []
    if isinstance(ignore, str):
        return [(ignore, "")]
    if isinstance(ignore, Mapping):
        return [(str(code), str(reason)) for code, reason in ignore.items()]
    pairs: list[tuple[str, str]] = []
    for item in ignore:
        if isinstance(item, str):
            pairs.append((item, ""))
        elif isinstance(item, tuple) and len(item) == 2:
            pairs.append((str(item[0]), str(item[1])))
        else:
            raise InvalidInputError(
                f"ignore entry {item!r} is not a rule code or a (code, reason) pair"
            )
    return pairs


def _names(value: Iterable[str] | str | None, what: str) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    for item in items:
        if not isinstance(item, str):
            raise InvalidInputError(f"{what} entry {item!r} is not a string")
    return items


def lint_sql(
    sql: str | bytes,
    *,
    dialect: str = "duckdb",
    partitioned_inputs: Iterable[str] | str | None = None,
    ignore: IgnoreSpec = None,
    period_params: Iterable[str] | str = ("start", "end"),
    microbatch: bool | None = None,
    severity: Mapping[str, str] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> LintResult:
    """Lint one model's SQL (with dbt Jinja) for backfill hazards.

    ``partitioned_inputs`` names the inputs partitioned by period (a model name for ``ref('m')``,
    ``'src.tbl'`` for ``source('src', 'tbl')``, or a table name; an entry matches any reference
    ending with it). ``ignore`` switches rules off for this model, with reasons:
    ``{"CLOCK_READ": "why"}`` (or a list of codes / ``(code, reason)`` pairs). ``severity``
    overrides a rule's severity (``{"UNBOUNDED_READ": "error"}``). ``microbatch`` says whether dbt
    filters ``ref()``/``source()`` by batch (None: read it from the model's ``config()``).
    ``path`` is only used to label findings.
    """
    if dialect not in DIALECTS and dialect not in ("postgresql", "databricks"):
        raise InvalidInputError(
            f"unknown SQL dialect {dialect!r}; expected one of {', '.join(DIALECTS)}"
        )
    label = os.fspath(path) if path is not None else None
    sev = [(str(k), str(v)) for k, v in (severity or {}).items()]
    raw = _core.lint_sql(
        sql,
        dialect,
        _names(partitioned_inputs, "partitioned_inputs"),
        _names(period_params, "period_params"),
        microbatch,
        _ignore_pairs(ignore),
        sev,
    )
    findings = [Finding(path=label, **d) for d in raw["findings"]]
    inputs = [InputRead(*t) for t in raw["inputs"]]
    logger.debug("linted %s: %d finding(s)", label or "<sql>", len(findings))
    return LintResult(findings, inputs=inputs, config=raw["config"], path=label)


def lint_file(path: str | os.PathLike[str], **options: Any) -> LintResult:
    """Lint a model file (read as bytes, so any encoding problem becomes a LINT_PARSE finding)."""
    with open(path, "rb") as fh:
        data = fh.read()
    return lint_sql(data, path=path, **options)


def tokenize(sql: str | bytes, *, dialect: str = "duckdb") -> list[Token]:
    """The tokens of ``sql`` (SQL and Jinja), tiling it: each starts where the previous ended."""
    data = sql.encode("utf-8", "surrogateescape") if isinstance(sql, str) else bytes(sql)
    return [
        Token(kind, off, n, line, col, data[off : off + n].decode("utf-8", "replace"))
        for kind, off, n, line, col in _core.tokenize_sql(data, dialect)
    ]


__all__ = [
    "DIALECTS",
    "RULES",
    "SEVERITIES",
    "Finding",
    "InputRead",
    "LintResult",
    "Token",
    "lint_file",
    "lint_sql",
    "tokenize",
]
