{{ config(materialized="incremental", incremental_strategy="microbatch", event_time="sales_month",
          begin="2026-01-01", batch_size="month", tags=["monthly"]) }}
-- Monthly rollup of fct_daily_sales: each month batch reads that month's days.
select
    cast(date_trunc('month', sales_date) as date) as sales_month,
    sum(orders) as orders,
    sum(units) as units,
    sum(revenue) as revenue,
    count(*) as days
from {{ ref("fct_daily_sales") }}
group by 1
