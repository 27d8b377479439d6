{{ config(materialized="incremental", incremental_strategy="microbatch", event_time="ordered_at",
          begin="2026-01-01", batch_size="day") }}
-- Order lines of the batch. Discounts arrive as a fraction in `discount` until July 2026 and as
-- a percentage in `discount_pct` from 1 August 2026 (the shop's new checkout).
select
    order_id,
    line_no,
    product_id,
    quantity,
    unit_price,
    discount,
    discount_pct,
    ordered_at
from {{ source("raw", "order_items") }}
where quantity > 0
