"""backfill.lint_sql / tokenize / the `backfill lint` CLI.

Positions are asserted exactly on real-looking models; hypothesis checks the tokenizer on
arbitrary text and bytes against an independent line/column oracle.
"""

from __future__ import annotations

import bisect
import importlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import backfill
from backfill import cli
from backfill.lint import DIALECTS, lint_file, lint_sql, tokenize

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
PARTITIONED = ["stg_orders", "clean_orders", "clean_order_items", "raw.web.events"]


def hits(result: backfill.LintResult) -> list[tuple[str, int, int, str]]:
    return [(f.code, f.line, f.column, f.text) for f in result]


# ----------------------------------------------------------------------------- real models


def test_dbt_incremental_model() -> None:
    r = lint_file(SQL_DIR / "dbt_incremental_orders.sql", partitioned_inputs=PARTITIONED)
    assert hits(r) == [
        ("UNBOUNDED_READ", 4, 19, "{{ ref('stg_orders') }}"),
        ("NONDETERMINISTIC", 13, 9, "row_number() over (partition by customer_id)"),
        ("CLOCK_READ", 21, 8, "dbt.current_timestamp()"),
        ("NONDETERMINISTIC", 22, 9, "invocation_id"),
    ]
    assert [f.severity for f in r] == ["warning", "error", "error", "error"]
    assert r.config == {"materialized": "incremental", "unique_key": "order_id"}
    assert [(i.kind, i.name) for i in r.inputs] == [("ref", "stg_orders")]
    assert not r.ok
    assert all(f.path and f.path.endswith("dbt_incremental_orders.sql") for f in r)
    assert all(f.hint and f.message for f in r)


def test_dbt_microbatch_model_is_clean() -> None:
    # config(incremental_strategy='microbatch'): dbt filters each ref() to the batch.
    r = lint_file(SQL_DIR / "dbt_microbatch_sales.sql", partitioned_inputs=PARTITIONED)
    assert hits(r) == []
    assert r.config["incremental_strategy"] == "microbatch"
    # Switched off explicitly, both partitioned refs are unbounded.
    r = lint_file(
        SQL_DIR / "dbt_microbatch_sales.sql", partitioned_inputs=PARTITIONED, microbatch=False
    )
    assert hits(r) == [
        ("UNBOUNDED_READ", 14, 6, "{{ ref('clean_orders') }}"),
        ("UNBOUNDED_READ", 15, 6, "{{ ref('clean_order_items') }}"),
    ]


def test_duckdb_delete_insert_model_is_clean() -> None:
    r = lint_file(SQL_DIR / "duckdb_daily_sales.sql", partitioned_inputs=PARTITIONED)
    assert hits(r) == []
    assert [(i.kind, i.name, i.line, i.column) for i in r.inputs] == [
        ("table", "clean_orders", 13, 6)
    ]


def test_duckdb_append_model() -> None:
    r = lint_file(SQL_DIR / "duckdb_append.sql", partitioned_inputs=PARTITIONED)
    assert hits(r) == [
        ("APPEND_ONLY", 1, 1, "insert into fct_daily_sales"),
        ("CLOCK_READ", 5, 5, "current_timestamp"),
        ("UNBOUNDED_READ", 6, 6, "clean_orders"),
        ("CLOCK_READ", 7, 21, "today()"),
    ]


def test_snowflake_model() -> None:
    r = lint_file(
        SQL_DIR / "snowflake_sessions.sql", dialect="snowflake", partitioned_inputs=PARTITIONED
    )
    assert hits(r) == [
        ("NONDETERMINISTIC", 4, 5, "uuid_string()"),
        ("CLOCK_READ", 5, 5, "sysdate()"),
        ("NONDETERMINISTIC", 7, 5, "first_value(e.page) over (partition by s.session_id)"),
    ]
    # :start binds the period; the "// ... not a parameter" comment and e.payload:utm are inert.
    assert [i.name for i in r.inputs] == ["raw.web.sessions", "raw.web.events"]


def test_bigquery_and_spark_models() -> None:
    bq = """
    select `project.dataset.orders`.id, generate_uuid() as k, "now()" as s, '''random()''' as t
    from `project.dataset.orders`  # a hash comment: now()
    where day >= @start and day < @end and ts < current_datetime()
    """
    lines = bq.splitlines()
    assert hits(lint_sql(bq, dialect="bigquery", partitioned_inputs=["orders"])) == [
        ("NONDETERMINISTIC", 2, lines[1].index("generate_uuid") + 1, "generate_uuid()"),
        ("CLOCK_READ", 4, lines[3].index("current_datetime") + 1, "current_datetime()"),
    ]
    spark = """insert into sales
select *, monotonically_increasing_id() as id, "now()" as s, unix_timestamp(ts) as u
from events where d >= '${start}' and d < '${end}'"""
    r = lint_sql(spark, dialect="spark", partitioned_inputs=["events"])
    assert hits(r) == [
        ("APPEND_ONLY", 1, 1, "insert into sales"),
        ("NONDETERMINISTIC", 2, 11, "monotonically_increasing_id()"),
    ]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_silent_on_strings_comments_quoted_and_parameterized(dialect: str) -> None:
    quote = "`" if dialect in ("bigquery", "spark") else '"'
    sql = f"""-- now(), random(), current_date in a comment
/* {{{{ run_started_at }}}} is only text here: rendered into a comment */
{{# {{{{ modules.datetime.datetime.now() }}}} is a Jinja comment #}}
select 'now()' as a, 'random()' as b, {quote}current_date{quote} as c,
       t.current_timestamp as d, x as now
from {{{{ ref('orders') }}}} t
where t.day >= '{{{{ start }}}}' and t.day < '{{{{ end }}}}'
"""
    assert hits(lint_sql(sql, dialect=dialect, partitioned_inputs=["orders"])) == []


# ----------------------------------------------------------------------------- positions


def test_columns_count_code_points() -> None:
    sql = "select 'Grüße, 日本 🙂' as s, now()\n\t-- é\n\tgetdate()"
    r = lint_sql(sql, dialect="snowflake")
    first_line = sql.splitlines()[0]
    assert hits(r) == [
        ("CLOCK_READ", 1, first_line.index("now()") + 1, "now()"),
        ("CLOCK_READ", 3, 2, "getdate()"),  # a tab is one column
    ]
    # offset/length are UTF-8 bytes
    f = r[0]
    assert sql.encode()[f.offset : f.offset + f.length] == b"now()"


def test_crlf_and_cr_line_ends() -> None:
    r = lint_sql("select 1\r\n, now()\r, random()")
    assert [(f.line, f.column) for f in r] == [(2, 3), (3, 3)]


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select 'abc", ("LINT_PARSE", 1, 8, "'")),
        ('select "abc', ("LINT_PARSE", 1, 8, '"')),
        ("select 1 /* x", ("LINT_PARSE", 1, 10, "/*")),
        ("select $$ x", ("LINT_PARSE", 1, 8, "$$")),
        ("select {{ ref('x') ", ("LINT_PARSE", 1, 8, "{{")),
        ("select {# x", ("LINT_PARSE", 1, 8, "{#")),
        ("{% if x %}\nselect 1", ("LINT_PARSE", 1, 1, "{% if x %}")),
        ("select 1\n{% endfor %}", ("LINT_PARSE", 2, 1, "{% endfor %}")),
        ("select 1 {% raw %} {{ x }}", ("LINT_PARSE", 1, 10, "{% raw %}")),
    ],
)
def test_lint_parse_positions(sql: str, expected: tuple[str, int, int, str]) -> None:
    r = lint_sql(sql)
    assert hits(r)[0] == expected
    assert r[0].severity == "error"


def test_binary_garbage_is_a_finding_not_an_exception() -> None:
    data = b"select \x00\x01 from t where x = '\xff\xfe' and now()"
    r = lint_sql(data)
    assert [(f.code, f.column) for f in r] == [
        ("LINT_PARSE", 8),  # the control bytes
        ("LINT_PARSE", data.index(b"\xff") + 1),  # invalid UTF-8
        ("CLOCK_READ", data.index(b"now") + 1),  # each bad byte counted as one column
    ]
    assert "invalid UTF-8" in " ".join(f.message for f in r)


def test_bad_options_name_the_value() -> None:
    with pytest.raises(backfill.InvalidInputError, match="'mysql'"):
        lint_sql("select 1", dialect="mysql")
    with pytest.raises(backfill.InvalidInputError, match="'CLOCK'"):
        lint_sql("select 1", ignore=["CLOCK"])
    with pytest.raises(backfill.InvalidInputError, match=re.escape("'raw..x'")):
        lint_sql("select 1", partitioned_inputs=["raw..x"])
    with pytest.raises(backfill.InvalidInputError, match="'loud'"):
        lint_sql("select 1", severity={"CLOCK_READ": "loud"})
    with pytest.raises(backfill.InvalidInputError, match="sql must be str or bytes"):
        lint_sql(42)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- suppression


def test_ignore_records_the_reason() -> None:
    r = lint_sql(
        "select now() as loaded_at, random() as r",
        ignore={"CLOCK_READ": "loaded_at is audit metadata"},
    )
    assert r.codes() == ["NONDETERMINISTIC"]
    assert [(f.code, f.reason) for f in r.suppressed] == [
        ("CLOCK_READ", "loaded_at is audit metadata")
    ]
    assert "CLOCK_READ suppressed (loaded_at is audit metadata)" in str(r)
    assert [d["suppressed"] for d in r.to_dicts()] == [True, False]


def test_inline_suppression_scopes() -> None:
    sql = """select
    now() as loaded_at,  -- backfill: ignore CLOCK_READ audit column, not compared
    -- backfill: ignore NONDETERMINISTIC,CLOCK_READ surrogate key for the UI only
    gen_random_uuid() as ui_key,
    current_date as d
"""
    r = lint_sql(sql)
    assert hits(r) == [("CLOCK_READ", 5, 5, "current_date")]
    assert [(f.line, f.reason) for f in r.suppressed] == [
        (2, "audit column, not compared"),
        (4, "surrogate key for the UI only"),
    ]
    whole = lint_sql("{# backfill: ignore-file CLOCK_READ snapshot model #}\n" + sql)
    assert whole.codes() == []


def test_severity_override() -> None:
    r = lint_sql(
        "select * from orders", partitioned_inputs=["orders"], severity={"UNBOUNDED_READ": "error"}
    )
    assert [(f.code, f.severity) for f in r] == [("UNBOUNDED_READ", "error")]


# ----------------------------------------------------------------------------- result API


def test_result_exports() -> None:
    r = lint_sql("select now(), random()", ignore={"NONDETERMINISTIC": "test"}, path="m.sql")
    assert len(r) == 1 and r[0].code == "CLOCK_READ" and list(r) == [r[0]]
    assert str(r).splitlines()[0] == (
        "m.sql:1:8: CLOCK_READ error: now() reads the clock: a backfill run for a past period "
        "would use today's date or time"
    )
    assert repr(r) == "<LintResult 'm.sql': 1 error, 1 suppressed>"
    df = r.to_pandas()
    assert list(df["code"]) == ["CLOCK_READ", "NONDETERMINISTIC"]
    assert list(df["suppressed"]) == [False, True]
    import pyarrow as pa

    table = pa.table(r)
    assert table.column("column").to_pylist() == [8, 15]
    assert table.column("path").to_pylist() == ["m.sql", "m.sql"]
    html = r._repr_html_()
    assert html is not None and "CLOCK_READ" in html and "suppressed: test" in html
    big = lint_sql(" ".join(["now()"] * 600))
    assert big._repr_html_() is None


def test_tokenize_kinds() -> None:
    toks = [
        (t.kind, t.text) for t in tokenize("select '{{ x }}' -- c") if "whitespace" not in t.kind
    ]
    assert toks == [
        ("word", "select"),
        ("string", "'"),
        ("jinja_open", "{{"),
        ("jinja_name", "x"),
        ("jinja_close", "}}"),
        ("string", "'"),
        ("comment", "-- c"),
    ]


# ----------------------------------------------------------------------------- hypothesis


def oracle_positions(data: bytes) -> tuple[list[int], ...]:
    starts = [0]
    for i, b in enumerate(data):
        if b == 0x0A or (b == 0x0D and (i + 1 == len(data) or data[i + 1] != 0x0A)):
            starts.append(i + 1)
    return (starts,)


def check_tokens(data: bytes, dialect: str) -> None:
    (starts,) = oracle_positions(data)
    pos = 0
    for t in tokenize(data, dialect=dialect):
        assert t.offset == pos and t.length > 0
        pos += t.length
        line = bisect.bisect_right(starts, t.offset)
        col = len(data[starts[line - 1] : t.offset].decode("utf-8", "surrogateescape")) + 1
        assert (t.line, t.column) == (line, col), (t, data)
    assert pos == len(data)


FRAGMENTS = st.sampled_from(
    [
        "select",
        " ",
        "\n",
        "\r\n",
        "\r",
        "\t",
        "'",
        "''",
        '"',
        "`",
        "$$",
        "$t$",
        "$1",
        "--",
        "/*",
        "*/",
        "#",
        "//",
        "{{",
        "}}",
        "{%",
        "%}",
        "{#",
        "#}",
        "(",
        ")",
        "now()",
        "random()",
        "over",
        "order by",
        "é",
        "日本",
        "🙂",
        "\\",
        "E'",
        ":",
        "::",
        "@",
        "${x}",
        "raw",
        "endraw",
        "if",
        "endif",
        "ref('orders')",
        ",",
        ";",
        "insert into t",
        "delete from t",
        "\x00",
        "\xff",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS, max_size=40).map("".join), st.sampled_from(DIALECTS))
def test_tokenizer_tiles_sqlish_text(text: str, dialect: str) -> None:
    data = text.encode("utf-8", "surrogateescape")
    check_tokens(data, dialect)
    r = lint_sql(data, dialect=dialect, partitioned_inputs=["orders"])
    for f in r.all:
        assert 0 <= f.offset <= len(data) and f.offset + f.length <= len(data)
        assert f.line >= 1 and f.column >= 1


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(DIALECTS))
def test_tokenizer_never_crashes_on_bytes(data: bytes, dialect: str) -> None:
    check_tokens(data, dialect)
    lint_sql(data, dialect=dialect)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200), st.sampled_from(DIALECTS))
def test_tokenizer_on_unicode_text(text: str, dialect: str) -> None:
    check_tokens(text.encode("utf-8", "surrogateescape"), dialect)


SAFE = st.text(alphabet="abc xyz_019,.()=<>é日", max_size=20)


@settings(max_examples=150, deadline=None)
@given(SAFE, SAFE, st.sampled_from(["'{}'", "-- {}\n", "/* {} */", '"{}"', "{{# {} #}}"]))
def test_clock_call_inside_inert_text_is_silent(before: str, after: str, wrapper: str) -> None:
    inert = wrapper.format(before + "now()" + after)
    sql = f"select 1 as a, {inert} as b"
    assert lint_sql(sql).codes() == []
    # ...and the same call in code is found exactly where it is.
    live = f"select {before!r}, now()"
    r = lint_sql(live)
    assert [(f.code, f.column) for f in r if f.code == "CLOCK_READ"] == [
        ("CLOCK_READ", live.index("now()") + 1)
    ]


# ----------------------------------------------------------------------------- CLI


def test_cli_lint_reports_files_and_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("select now()\n")
    good = tmp_path / "models" / "good.sql"
    good.parent.mkdir()
    good.write_text("select * from {{ ref('orders') }} where d >= '{{ start }}'\n")
    assert cli.main(["lint", str(bad), str(good.parent)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:1:8: CLOCK_READ error: now() reads the clock" in out
    assert out.strip().endswith("1 error(s), 0 warning(s), 0 suppressed in 2 file(s)")

    assert cli.main(["lint", str(good), "--partitioned", "orders"]) == 0
    capsys.readouterr()
    assert cli.main(["lint", str(bad), "--ignore", "CLOCK_READ=audit only", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["code"], r["suppressed"], r["reason"]) for r in rows] == [
        ("CLOCK_READ", True, "audit only")
    ]


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.sql"
    f.write_text("insert into t select random()")
    assert cli.main(["lint", "--json", "--dialect", "postgres", str(f)]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["code"], r["line"], r["column"], r["path"]) for r in rows] == [
        ("APPEND_ONLY", 1, 1, str(f)),
        ("NONDETERMINISTIC", 1, 22, str(f)),
    ]


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lint", str(tmp_path / "missing.sql")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert cli.main(["lint", str(tmp_path)]) == 2  # a directory without .sql files
    with pytest.raises(SystemExit) as exc:
        cli.main(["lint", "--dialect", "mysql", "x.sql"])
    assert exc.value.code == 2
    assert cli.main(["lint", "--ignore", "NOPE", str(tmp_path)]) == 2


# ----------------------------------------------------------------------------- dbt idioms


def test_dbt_idioms() -> None:
    # SQL handed to dbt macros as strings renders into the model.
    sql = "select * from {{ dbt_utils.date_spine('day', \"'2026-01-01'\", 'current_date') }}"
    assert hits(lint_sql(sql)) == [("CLOCK_READ", 1, sql.index("current_date") + 1, "current_date")]
    # A ref() bound with {% set %} is read where it is used.
    aliased = "{% set src = ref('orders') %}\nselect * from {{ src }}"
    assert hits(lint_sql(aliased, partitioned_inputs=["orders"])) == [
        ("UNBOUNDED_READ", 2, 15, "{{ src }}")
    ]
    # dbt microbatch filters ref() unless .render() asks for the whole input.
    mb = "select * from {{ ref('orders').render() }} join {{ ref('orders') }} using (id)"
    r = lint_sql(mb, partitioned_inputs=["orders"], microbatch=True)
    assert hits(r) == [("UNBOUNDED_READ", 1, 15, "{{ ref('orders').render() }}")]
    assert ".render()" in r[0].message
    # A development LIMIT under a Jinja condition is not what production runs.
    dev = "select * from t {% if target.name == 'dev' %} limit 100 {% endif %}"
    assert hits(lint_sql(dev)) == []
    assert hits(lint_sql("select * from t limit 100")) == [("NONDETERMINISTIC", 1, 17, "limit 100")]
    # config() in a SQL comment still configures the model (a classic dbt gotcha).
    assert lint_sql("-- {{ config(incremental_strategy='append') }}\nselect 1").config == {
        "incremental_strategy": "append"
    }


# ----------------------------------------------------------------------------- DuckDB as oracle

ORACLE_FRAGMENTS = st.sampled_from(
    [
        "select",
        " ",
        "\n",
        "'",
        "''",
        '"',
        "--",
        "/*",
        "*/",
        "$$",
        "$t$",
        "E'",
        "x'",
        "\\",
        "x",
        "1",
        ",",
        "(",
        ")",
        "now()",
        ".",
        "::",
        "$1",
        "t$",
        "-",
        "*",
        "/",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ORACLE_FRAGMENTS, max_size=25).map("".join))
@example("$$t$$$E'")  # found by hypothesis: "$E'" is "$" and an E-string, not a $E parameter
@example("$X'0F'")
def test_strings_comments_and_quoted_names_agree_with_duckdb(sql: str) -> None:
    """DuckDB's own tokenizer decides what is a string, a comment or a quoted name: so do we."""
    duckdb = importlib.import_module("duckdb")
    if int(duckdb.__version__.split(".")[0]) < 2:
        # The oracle is DuckDB 2's tokenizer, which the lint follows ("$E'" is "$" and an
        # E-string); DuckDB 1.x, the newest on Python 3.10, reads it otherwise.
        pytest.skip(f"DuckDB {duckdb.__version__}: the lint follows DuckDB 2's tokenizer")
    try:
        theirs = {pos: str(kind).rsplit(".", 1)[-1] for pos, kind in duckdb.tokenize(sql)}
    except Exception:  # DuckDB refuses some garbage outright; nothing to compare
        return
    mine = {t.offset: t.kind for t in tokenize(sql)}
    for pos, kind in theirs.items():
        if kind == "string_const":
            assert mine.get(pos) == "string", (sql, pos)
        elif kind == "comment":
            assert mine.get(pos) == "comment", (sql, pos)
        elif kind == "identifier" and sql[pos] == '"':
            assert mine.get(pos) == "quoted_name", (sql, pos)
    for pos, kind in mine.items():
        if kind in ("string", "comment"):
            assert theirs.get(pos) in ("string_const", "comment"), (sql, pos)


def test_cli_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import sys

    fake = io.TextIOWrapper(io.BytesIO(b'select * from "Raw"."Orders"'))
    monkeypatch.setattr(sys, "stdin", fake)
    assert cli.main(["lint", "-", "--partitioned", "raw.orders"]) == 0  # a warning only
    out = capsys.readouterr().out
    assert out.startswith("<stdin>:1:15: UNBOUNDED_READ warning: table Raw.Orders")


def test_docstring_examples_hold() -> None:
    import doctest

    import backfill.checks
    import backfill.lint

    for module in (backfill.lint, backfill.checks):
        failures, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert tried > 0 and failures == 0, module.__name__


def test_cli_severity_and_period_params(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.sql"
    f.write_text("select * from orders where d >= '{{ run_date }}'")
    assert cli.main(["lint", str(f), "--partitioned", "orders"]) == 0  # warning only
    assert (
        cli.main(["lint", str(f), "--partitioned", "orders", "--severity", "UNBOUNDED_READ=error"])
        == 1
    )
    assert (
        cli.main(
            [
                "lint",
                str(f),
                "--partitioned",
                "orders",
                "--severity",
                "UNBOUNDED_READ=error",
                "--period-params",
                "run_date",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert cli.main(["lint", str(f), "--severity", "UNBOUNDED_READ"]) == 2
    assert "CODE=LEVEL" in capsys.readouterr().err
