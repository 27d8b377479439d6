{{ config(event_time="ordered_at") }}
-- One row per real order of the period: test orders dropped, status normalised.
select
    order_id,
    customer_id,
    ordered_at,
    country,
    lower(status) as status
from {{ source("raw", "orders") }}
where ordered_at >= {{ start }} and ordered_at < {{ end }}
  and lower(status) <> 'test'
