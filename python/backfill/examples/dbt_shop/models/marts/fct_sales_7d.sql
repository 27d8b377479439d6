{{ config(materialized="table", tags=["daily"]) }}
-- Revenue over the 7 days ending on each day. A rolling window reads days outside any one batch,
-- so this model is a table rebuilt whole (after fct_daily_sales).
select
    d.sales_date,
    sum(w.revenue) as revenue_7d,
    sum(w.orders) as orders_7d,
    count(*) as days_in_window
from {{ ref("fct_daily_sales") }} d
join {{ ref("fct_daily_sales") }} w
  on w.sales_date between d.sales_date - 6 and d.sales_date
group by 1
