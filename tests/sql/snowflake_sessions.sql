create or replace table analytics.sessions as
select
    s.session_id,
    uuid_string() as session_key,
    sysdate() as loaded_at,
    listagg(e.page, ' > ') within group (order by e.ts) as path,
    first_value(e.page) over (partition by s.session_id) as landing_page,
    e.payload:utm.source::string as utm_source  // semi-structured path, not a parameter
from raw.web.sessions s
join raw.web.events e on e.session_id = s.session_id
where s.started_at >= :start and s.started_at < :end
