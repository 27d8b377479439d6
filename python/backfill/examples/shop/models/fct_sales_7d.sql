{{ config(event_time="sales_date") }}
-- Revenue over the 7 days ending on each day: a day's row reads that day and the 6 before it.
select
    d.sales_date,
    sum(w.revenue) as revenue_7d,
    sum(w.orders) as orders_7d,
    count(*) as days_in_window
from {{ ref("fct_daily_sales", window=[-6, 0]) }} d
join {{ ref("fct_daily_sales", window=[-6, 0]) }} w
  on w.sales_date between d.sales_date - 6 and d.sales_date
where d.sales_date >= {{ start }} and d.sales_date < {{ end }}
  and w.sales_date >= cast({{ start }} as date) - 6 and w.sales_date < {{ end }}
group by 1
