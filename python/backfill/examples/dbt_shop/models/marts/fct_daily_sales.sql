{{ config(materialized="incremental", incremental_strategy="microbatch", event_time="sales_date",
          begin="2026-01-01", batch_size="day", tags=["daily"]) }}
-- Completed sales per day. Revenue is net of line discounts.
select
    cast(o.ordered_at as date) as sales_date,
    count(distinct o.order_id) as orders,
    sum(i.quantity) as units,
    cast(sum(i.quantity * i.unit_price * (1 - coalesce(i.discount, 0))) as decimal(18, 2))
        as revenue
from {{ ref("clean_orders") }} o
join {{ ref("clean_order_items") }} i using (order_id)
where o.status = 'completed'
group by 1
