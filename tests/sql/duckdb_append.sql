insert into fct_daily_sales
select
    ordered_at::date as sales_date,
    sum(amount) as revenue,
    current_timestamp as loaded_at
from clean_orders
where ordered_at >= today() - interval 1 day
group by 1;
