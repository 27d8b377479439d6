{{ config(
    materialized='incremental',
    incremental_strategy='microbatch',
    event_time='sales_date',
    batch_size='day',
    begin='2026-01-01'
) }}

-- Each batch reads only its own day of clean_orders (event_time on the input).
select
    o.ordered_at::date as sales_date,
    sum(i.quantity * i.unit_price) as revenue,
    string_agg(distinct o.channel, ',' order by o.channel) as channels
from {{ ref('clean_orders') }} o
join {{ ref('clean_order_items') }} i on i.order_id = o.order_id
group by 1
