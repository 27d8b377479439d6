{{ config(materialized="incremental", incremental_strategy="microbatch", event_time="order_date",
          begin="2026-01-01", batch_size="day", tags=["daily"]) }}
-- Completed orders per day and region. country_regions (a seed) has no event_time, so dbt
-- cannot filter it to the batch: every batch reads the whole seed.
select
    cast(o.ordered_at as date) as order_date,
    r.region,
    count(*) as orders
from {{ ref("clean_orders") }} o
join {{ ref("country_regions") }} r using (country)
where o.status = 'completed'
group by 1, 2
