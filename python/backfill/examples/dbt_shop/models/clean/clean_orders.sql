{{ config(materialized="incremental", incremental_strategy="microbatch", event_time="ordered_at",
          begin="2026-01-01", batch_size="day") }}
-- One row per real order of the batch: test orders dropped, status normalised. dbt filters the
-- source to the batch by its event_time (ordered_at).
select
    order_id,
    customer_id,
    ordered_at,
    country,
    lower(status) as status
from {{ source("raw", "orders") }}
where lower(status) <> 'test'
