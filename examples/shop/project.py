"""The shop of our design notes, as a Python-built project (a file format comes with the runner).

raw.orders, raw.order_items -> clean_orders, clean_order_items -> fct_daily_sales
    -> fct_monthly_sales (monthly rollup) and fct_sales_7d (7-day rolling window).

    backfill plan --project examples/shop/project.py --select "fct_daily_sales+" \
        --start 2026-08-01 --end 2026-10-29
"""

from __future__ import annotations

import backfill

BEGIN = "2026-01-01"


def build_project() -> backfill.Project:
    p = backfill.Project("shop")
    p.source("raw.orders", grain="day", event_time="ordered_at", kind="raw")
    p.source("raw.order_items", grain="day", event_time="ordered_at", kind="raw")
    p.model(
        "clean_orders",
        depends_on=["raw.orders"],
        grain="day",
        begin=BEGIN,
        event_time="ordered_at",
        tags=["clean", "daily"],
        sql="select * from {{ source('raw', 'orders') }} "
        "where ordered_at >= {{ start }} and ordered_at < {{ end }}",
    )
    p.model(
        "clean_order_items",
        depends_on=["raw.order_items"],
        grain="day",
        begin=BEGIN,
        event_time="ordered_at",
        tags=["clean", "daily"],
        sql="select * from {{ source('raw', 'order_items') }} "
        "where ordered_at >= {{ start }} and ordered_at < {{ end }}",
    )
    p.model(
        "fct_daily_sales",
        depends_on=["clean_orders", "clean_order_items"],
        grain="day",
        begin=BEGIN,
        event_time="sales_date",
        tags=["finance", "daily"],
        sql="select cast(o.ordered_at as date) as sales_date, "
        "sum(i.quantity * i.unit_price * (1 - i.discount)) as revenue "
        "from {{ ref('clean_orders') }} o join {{ ref('clean_order_items') }} i using (order_id) "
        "where o.ordered_at >= {{ start }} and o.ordered_at < {{ end }} group by 1",
    )
    p.model(
        "fct_monthly_sales",
        depends_on=["fct_daily_sales"],
        grain="month",
        begin=BEGIN,
        event_time="sales_month",
        tags=["finance", "monthly"],
        sql="select date_trunc('month', sales_date) as sales_month, sum(revenue) as revenue "
        "from {{ ref('fct_daily_sales') }} "
        "where sales_date >= {{ start }} and sales_date < {{ end }} group by 1",
    )
    p.model(
        "fct_sales_7d",
        depends_on=[backfill.window("fct_daily_sales", -6, 0)],
        grain="day",
        begin=BEGIN,
        event_time="sales_date",
        tags=["finance", "daily"],
        sql="select {{ start }}::date as sales_date, sum(revenue) as revenue_7d "
        "from {{ ref('fct_daily_sales') }} "
        "where sales_date >= {{ start }}::date - 6 and sales_date < {{ end }}",
    )
    return p


project = build_project()
