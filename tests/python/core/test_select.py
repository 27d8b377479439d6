"""dbt selector syntax over a project graph."""

from __future__ import annotations

import re

import pytest

import backfill
from plan_helpers import shop


@pytest.fixture(scope="module")
def p() -> backfill.Project:
    project = shop()
    project.model("dim_customers", sql="select 1", tags=["dims"])
    project.model(
        "rpt_finance", depends_on=["fct_monthly_sales", "dim_customers"], tags=["finance"]
    )
    project.model("legacy_orders", grain="day", depends_on=["raw.orders"], strategy="append")
    return project


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("fct_daily_sales", ["fct_daily_sales"]),
        (
            "fct_daily_sales+",
            ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d", "rpt_finance"],
        ),
        ("fct_daily_sales+1", ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]),
        ("+fct_daily_sales", ["clean_orders", "clean_order_items", "fct_daily_sales"]),
        ("1+fct_monthly_sales", ["fct_daily_sales", "fct_monthly_sales"]),
        (
            "2+fct_monthly_sales",
            ["clean_orders", "clean_order_items", "fct_daily_sales", "fct_monthly_sales"],
        ),
        # @: the model, its descendants and all ancestors of those descendants.
        (
            "@fct_monthly_sales",
            [
                "clean_orders",
                "clean_order_items",
                "fct_daily_sales",
                "fct_monthly_sales",
                "dim_customers",
                "rpt_finance",
            ],
        ),
        ("tag:finance", ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d", "rpt_finance"]),
        ("tag:fin*", ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d", "rpt_finance"]),
        ("fct_*", ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]),
        ("fct_?????_sales", ["fct_daily_sales"]),
        ("clean_order[s_]*", ["clean_orders", "clean_order_items"]),
        # space = union, comma = intersection
        ("clean_orders fct_sales_7d", ["clean_orders", "fct_sales_7d"]),
        ("tag:daily,fct_*", ["fct_daily_sales", "fct_sales_7d"]),
        ("fct_daily_sales+,tag:monthly", ["fct_monthly_sales"]),
        (
            "source:raw.orders+",
            [
                "clean_orders",
                "fct_daily_sales",
                "fct_monthly_sales",
                "fct_sales_7d",
                "rpt_finance",
                "legacy_orders",
            ],
        ),
        ("source:raw.*+1", ["clean_orders", "clean_order_items", "legacy_orders"]),
        ("strategy:append", ["legacy_orders"]),
        ("config.materialized:full", ["dim_customers", "rpt_finance"]),
        ("grain:month", ["fct_monthly_sales"]),
        ("grain:none", ["dim_customers", "rpt_finance"]),
        ("raw.orders+1", ["clean_orders", "legacy_orders"]),  # sources never appear
    ],
)
def test_selectors(p: backfill.Project, selector: str, expected: list[str]) -> None:
    assert p.select(selector) == expected


def test_exclude(p: backfill.Project) -> None:
    assert p.select("fct_daily_sales+", exclude="fct_sales_7d rpt_finance") == [
        "fct_daily_sales",
        "fct_monthly_sales",
    ]
    assert p.select("tag:finance", exclude="tag:daily") == ["fct_monthly_sales", "rpt_finance"]
    with pytest.raises(backfill.NotFoundError, match="with exclude 'fct_\\*' selects no model"):
        p.select("fct_*", exclude="fct_*")


def test_result_is_in_topological_order(p: backfill.Project) -> None:
    order = p.topological_order()
    got = p.select("rpt_finance clean_orders fct_daily_sales")
    assert got == sorted(got, key=order.index)


@pytest.mark.parametrize(
    ("selector", "error", "message"),
    [
        (
            "fct_dialy_sales+",
            backfill.NotFoundError,
            re.escape(
                "selector 'fct_dialy_sales+' matches no model (did you mean 'fct_daily_sales'?)"
            ),
        ),
        ("tag:nope", backfill.NotFoundError, "selector 'tag:nope' matches no model"),
        ("nothing_*", backfill.NotFoundError, "selector 'nothing_\\*' matches no model"),
        ("", backfill.InvalidInputError, "empty selector"),
        ("+", backfill.InvalidInputError, "names no model"),
        ("colour:red", backfill.InvalidInputError, "unknown method 'colour'"),
        ("@x+", backfill.InvalidInputError, "'@' cannot be combined"),
        ("source:raw.orders", backfill.NotFoundError, "selects no model \\(only sources\\)"),
    ],
)
def test_selector_errors(
    p: backfill.Project, selector: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        p.select(selector)


def test_intersection_is_applied_before_union(p: backfill.Project) -> None:
    # "a b,c" = a | (b & c)
    assert p.select("clean_orders tag:monthly,fct_*") == ["clean_orders", "fct_monthly_sales"]
