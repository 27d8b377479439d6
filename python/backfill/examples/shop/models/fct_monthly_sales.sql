{{ config(grain="month", event_time="sales_month") }}
-- Monthly rollup of fct_daily_sales.
select
    cast(date_trunc('month', sales_date) as date) as sales_month,
    sum(orders) as orders,
    sum(units) as units,
    sum(revenue) as revenue,
    count(*) as days
from {{ ref("fct_daily_sales") }} d
where sales_date >= {{ start }} and sales_date < {{ end }}
group by 1
