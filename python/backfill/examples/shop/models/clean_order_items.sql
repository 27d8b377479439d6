{{ config(event_time="ordered_at") }}
-- Order lines of the period. Discounts arrive as a fraction in `discount` until July 2026 and
-- as a percentage in `discount_pct` from 1 August 2026 (the shop's new checkout).
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
where ordered_at >= {{ start }} and ordered_at < {{ end }}
  and quantity > 0
