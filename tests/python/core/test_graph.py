"""Project definition and the model graph: validation errors, order, upstream/downstream."""

from __future__ import annotations

import datetime as dt
import re
from itertools import pairwise

import pytest

import backfill
from plan_helpers import shop


def test_shop_graph_order_and_neighbours() -> None:
    p = shop()
    assert p.topological_order() == [
        "clean_orders",
        "clean_order_items",
        "fct_daily_sales",
        "fct_monthly_sales",
        "fct_sales_7d",
    ]
    assert p.topological_order(include_sources=True)[:2] == ["raw.orders", "raw.order_items"]
    assert p.upstream("fct_daily_sales") == [
        "raw.orders",
        "raw.order_items",
        "clean_orders",
        "clean_order_items",
    ]
    assert p.upstream("fct_sales_7d", depth=1) == ["fct_daily_sales"]
    assert p.downstream("clean_orders") == ["fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"]
    assert p.downstream("clean_orders", depth=1) == ["fct_daily_sales"]
    assert p.downstream("fct_sales_7d") == []
    assert p.parents("fct_sales_7d") == [("fct_daily_sales", "window(-6, 0)")]
    assert list(p.models) == p.topological_order()
    assert list(p.sources) == ["raw.orders", "raw.order_items"]
    assert p["fct_sales_7d"].depends_on == (backfill.window("fct_daily_sales", -6, 0),)
    assert repr(p) == "Project('shop': 2 sources, 5 models)"


def test_topological_order_is_stable_in_declaration_order() -> None:
    p = backfill.Project()
    p.model("z", grain="day", depends_on=["b"])
    p.model("b", grain="day")
    p.model("a", grain="day")
    p.model("c", grain="day", depends_on=["a"])
    assert p.topological_order() == ["b", "z", "a", "c"]


def test_unknown_parent_names_model_and_parent() -> None:
    p = backfill.Project()
    p.model("clean_orders", grain="day")
    p.model("fct", grain="day", depends_on=["clean_order"])
    with pytest.raises(backfill.NotFoundError) as err:
        p.validate()
    assert "'fct'" in str(err.value) and "'clean_order'" in str(err.value)
    assert "did you mean 'clean_orders'" in str(err.value)
    assert isinstance(err.value, KeyError)


def test_cycle_error_lists_the_path() -> None:
    p = backfill.Project()
    p.model("a", grain="day", depends_on=["c"])
    p.model("b", grain="day", depends_on=["a"])
    p.model("c", grain="day", depends_on=["b"])
    p.model("d", grain="day", depends_on=["a"])
    with pytest.raises(backfill.CycleError) as err:
        p.topological_order()
    message = str(err.value)
    assert message.startswith("dependency cycle: ")
    path = message.removeprefix("dependency cycle: ").split(" -> ")
    assert path[0] == path[-1] and sorted(path[:-1]) == ["a", "b", "c"]
    for x, y in pairwise(path):  # each step is a real edge, parent -> child
        assert x in p.models[y].parents
    assert isinstance(err.value, ValueError)


def test_self_dependency_is_a_cycle() -> None:
    p = backfill.Project()
    p.model("a", grain="day", depends_on=["a"])
    with pytest.raises(backfill.CycleError, match="a -> a"):
        p.validate()


def test_duplicate_names_rejected() -> None:
    p = backfill.Project()
    p.source("raw.orders", grain="day")
    with pytest.raises(backfill.InvalidInputError, match=re.escape("duplicate name 'raw.orders'")):
        p.model("raw.orders", grain="day")
    p.model("m", grain="day", depends_on=["raw.orders"])
    with pytest.raises(backfill.InvalidInputError, match="duplicate name 'm'"):
        p.model("m", grain="day")
    p2 = backfill.Project()
    p2.model("x", grain="day", depends_on=["raw.orders", "raw.orders"])
    p2.source("raw.orders", grain="day")
    with pytest.raises(
        backfill.InvalidInputError, match=re.escape("depends on 'raw.orders' twice")
    ):
        p2.validate()


def test_graph_rejects_duplicates_directly() -> None:
    nodes = [{"name": "a", "grain": "day"}, {"name": "a", "grain": "day"}]
    with pytest.raises(backfill.InvalidInputError, match="duplicate name 'a'"):
        backfill._core.Graph(nodes)


def test_window_validation() -> None:
    with pytest.raises(backfill.InvalidInputError, match=r"start 2 is after end -1"):
        backfill.window("x", 2, -1)
    with pytest.raises(backfill.InvalidInputError, match="not an integer"):
        backfill.window("x", 0.5, 1)  # type: ignore[arg-type]
    # The C++ graph checks too (for callers that build it directly).
    nodes = [
        {"name": "x", "grain": "day"},
        {"name": "y", "grain": "day", "depends_on": [("x", "window", 3, 1)]},
    ]
    with pytest.raises(backfill.InvalidInputError, match=r"window\(3, 1\).*start is after its end"):
        backfill._core.Graph(nodes)
    p = backfill.Project()
    p.model("x", grain="day")
    p.model("y", depends_on=[backfill.window("x", -1, 0)])
    with pytest.raises(backfill.InvalidInputError, match=r"'y' reads 'x' through window.*no grain"):
        p.validate()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grain": "fortnight"}, "fortnight"),
        ({"grain": "day", "tz": "Mars/Olympus"}, "Mars/Olympus"),
        ({"grain": "day", "strategy": "upsert"}, "unknown strategy 'upsert'"),
        ({"grain": "day", "strategy": "merge"}, "needs a unique_key"),
        ({"strategy": "replace"}, "strategy 'replace' but no grain"),
        ({"grain": "day", "strategy": "full"}, "rebuilt whole, so it takes no grain"),
        ({"begin": "2026-01-01"}, "begin is set but the model has no grain"),
        ({"grain": "day", "begin": dt.datetime(2026, 1, 1)}, "naive"),
        ({"grain": "day", "depends_on": [3]}, "dependency 3 is not a name"),
    ],
)
def test_bad_model_definitions(kwargs: dict[str, object], message: str) -> None:
    p = backfill.Project()
    with pytest.raises(backfill.InvalidInputError, match=message):
        p.model("m", **kwargs)  # type: ignore[arg-type]
        p.validate()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"retention": "7 days"}, "retention '7 days' is not a duration"),
        ({"retention": "0d"}, "not a duration"),
        ({"kind": "s3"}, "unknown kind 's3'"),
    ],
)
def test_bad_source_definitions(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(backfill.InvalidInputError, match=message):
        backfill.Project().source("raw.x", grain="day", **kwargs)  # type: ignore[arg-type]


def test_retention_forms() -> None:
    p = backfill.Project()
    assert p.source("a", retention="7d").retention == dt.timedelta(days=7)
    assert p.source("b", retention="12h").retention == dt.timedelta(hours=12)
    assert p.source("c", retention="2w").retention == dt.timedelta(weeks=2)
    assert p.source("d", retention=dt.timedelta(days=90)).retention == dt.timedelta(days=90)
    assert p.source("e").retention is None


def test_unpartitioned_defaults_to_full_and_partitioned_to_replace() -> None:
    p = backfill.Project()
    assert p.model("dim", sql="select 1").strategy == "full"
    assert p.model("fct", grain="day").strategy == "replace"
    assert p.model("v", strategy="view").grain is None
    assert p.model("m", grain="day", strategy="merge", unique_key="id").unique_key == ("id",)
