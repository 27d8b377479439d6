/* fct_daily_sales: one day per run, replaced as a whole.
   'now()' and random() in this comment are not findings. */
delete from fct_daily_sales
where sales_date >= $start and sales_date < $end;

insert into fct_daily_sales
select
    ordered_at::date as sales_date,
    count(*) as orders,
    sum(amount) as revenue,
    'now()' as note,
    "current_date" as quoted_column
from clean_orders
where ordered_at >= $start and ordered_at < $end
group by 1;
