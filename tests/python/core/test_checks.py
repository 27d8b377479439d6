"""backfill.check_model: lint findings plus the write strategy."""

from __future__ import annotations

import pytest

import backfill
from backfill.checks import STRATEGIES, check_model

MODEL = "select * from {{ ref('orders') }} where d >= '{{ start }}' and d < '{{ end }}'"


def test_append_strategy_is_an_error() -> None:
    r = check_model(sql=MODEL, strategy="append")
    assert [(f.code, f.severity) for f in r] == [("APPEND_STRATEGY", "error")]
    assert "append" in r[0].message and r[0].hint
    assert not r.ok


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "append"])
def test_other_strategies_are_fine(strategy: str) -> None:
    assert check_model(sql=MODEL, strategy=strategy).codes() == []


def test_strategy_from_config_and_lint_findings_combined() -> None:
    sql = "{{ config(incremental_strategy='append') }}\nselect now(), * from {{ ref('orders') }}"
    r = check_model(sql=sql, partitioned_inputs=["orders"])
    assert r.codes() == ["APPEND_STRATEGY", "CLOCK_READ", "UNBOUNDED_READ"]
    assert "config(incremental_strategy='append')" in r[0].message


def test_microbatch_strategy_bounds_refs() -> None:
    sql = "select * from {{ ref('orders') }}"
    assert check_model(sql=sql, strategy="microbatch", partitioned_inputs=["orders"]).codes() == []
    assert check_model(sql=sql, strategy="merge", partitioned_inputs=["orders"]).codes() == [
        "UNBOUNDED_READ"
    ]


def test_append_strategy_can_be_ignored_with_a_reason() -> None:
    r = check_model(
        sql=MODEL,
        strategy="append",
        ignore={"APPEND_STRATEGY": "event log, deduplicated downstream"},
    )
    assert r.codes() == []
    assert [(f.code, f.reason) for f in r.suppressed] == [
        ("APPEND_STRATEGY", "event log, deduplicated downstream")
    ]


def test_unknown_strategy_is_named() -> None:
    with pytest.raises(backfill.InvalidInputError, match="'upsert'"):
        check_model(sql=MODEL, strategy="upsert")
