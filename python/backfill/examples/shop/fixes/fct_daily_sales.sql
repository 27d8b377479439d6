{{ config(event_time="sales_date") }}
-- Completed sales per day. Revenue is net of line discounts.
-- Fixed: from 1 August 2026 discounts arrive as `discount_pct` (percent), not `discount`.
select
    cast(o.ordered_at as date) as sales_date,
    count(distinct o.order_id) as orders,
    sum(i.quantity) as units,
    cast(sum(i.quantity * i.unit_price
             * (1 - coalesce(i.discount, i.discount_pct * 0.01, 0))) as decimal(18, 2))
        as revenue
from {{ ref("clean_orders") }} o
join {{ ref("clean_order_items") }} i using (order_id)
where o.ordered_at >= {{ start }} and o.ordered_at < {{ end }}
  and i.ordered_at >= {{ start }} and i.ordered_at < {{ end }}
  and o.status = 'completed'
group by 1
