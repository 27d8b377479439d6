"""dbt selectors on an imported project agree with ``dbt ls --resource-type model``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import backfill
from backfill.errors import InvalidInputError, NotFoundError
from dbt_support import dbt

SELECTORS = [
    ("fct_daily_sales", None),
    ("fct_daily_sales+", None),
    ("+fct_monthly_sales", None),
    ("1+fct_monthly_sales", None),
    ("fct_daily_sales+1", None),
    ("2+fct_sales_7d", None),
    ("@clean_orders", None),
    ("@fct_daily_sales", None),
    ("tag:daily", None),
    ("tag:fin*", None),
    ("tag:clean,tag:daily", None),
    ("tag:daily,config.batch_size:day", None),
    ("path:models/marts", None),
    ("path:models/clean/clean_orders.sql", None),
    ("models/clean", None),
    ("marts", None),
    ("dbt_shop.marts.fct_*", None),
    ("config.materialized:table", None),
    ("config.materialized:incremental", None),
    ("config.incremental_strategy:microbatch", None),
    ("config.batch_size:month", None),
    ("source:raw.orders+", None),
    ("source:raw+", None),
    ("country_regions+", None),
    ("package:dbt_shop", None),
    ("clean_orders.sql+", None),
    ("fct_sales_7d clean_orders", None),
    ("clean_orders+", "fct_sales_7d"),
    ("tag:daily", "tag:clean"),
    ("source:raw+", "config.batch_size:month fct_sales_7d"),
    ("@fct_daily_sales", "+clean_orders"),
]


@pytest.fixture(scope="module")
def shop(built_dbt_shop: Path) -> backfill.Project:
    return backfill.Project.from_dbt(built_dbt_shop)


@pytest.mark.parametrize("select, exclude", SELECTORS)
def test_selection_matches_dbt_ls(
    shop: backfill.Project, built_dbt_shop: Path, select: str, exclude: str | None
) -> None:
    args = ["ls", "--resource-type", "model", "--output", "name", "--select", *select.split()]
    if exclude:
        args += ["--exclude", *exclude.split()]
    expected = set(dbt(built_dbt_shop, *args).result)
    ours = shop.select(select, exclude)
    assert set(ours) == expected, (select, exclude)
    assert ours == [m for m in shop.topological_order() if m in expected]  # parents first
    assert expected  # every case selects something in dbt too


def test_a_selection_of_nothing_is_an_error_as_dbt_warns(
    shop: backfill.Project, built_dbt_shop: Path
) -> None:
    # a bare glob is matched against fully qualified names: dbt selects nothing
    assert dbt(built_dbt_shop, "ls", "--resource-type", "model", "--select", "fct_*").result == []
    with pytest.raises(NotFoundError, match="'fct_\\*' matches no model"):
        shop.select("fct_*")
    with pytest.raises(NotFoundError, match="matches no model"):
        shop.plan("no_such_model", "2026-08-01", "2026-08-02")


def test_bad_selectors_are_refused(shop: backfill.Project) -> None:
    with pytest.raises(InvalidInputError, match="method 'colour' is not supported"):
        shop.select("colour:red")
    with pytest.raises(InvalidInputError, match="cannot be combined"):
        shop.select("@+fct_daily_sales")
    with pytest.raises(InvalidInputError, match=re.escape("config.<key>")):
        shop.select("config:table")
