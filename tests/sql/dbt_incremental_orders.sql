{{ config(materialized='incremental', unique_key='order_id') }}

with orders as (
    select * from {{ ref('stg_orders') }}
    {% if is_incremental() %}
    where updated_at > (select max(updated_at) from {{ this }})
    {% endif %}
),

ranked as (
    select
        *,
        row_number() over (partition by customer_id) as rn
    from orders
)

select
    order_id,
    customer_id,
    amount,
    {{ dbt.current_timestamp() }} as loaded_at,
    '{{ invocation_id }}' as run_id
from ranked
where rn = 1
