-- migrate: steps
-- Nothing the service keeps carries a privacy case's person's details (docs/privacy.md#privacy-cases):
-- capture keeps an incident that is one without person_name, worker_id, location, description,
-- body_part and injury_type, in the mirror and in a held record's row in the quarantine, since
-- release 0.3.0 (whose fence, raised by 050, stops older captures first). The rows kept before
-- lose them here, in batches that commit. The mirror stores a row by position (the columns of
-- src/domain/records/columns.ts, in that order: description 5, location 8, person_name 9,
-- worker_id 10, body_part 11, injury_type 12, privacy_case 14) or, missing a column, as an
-- object; a row a view stands for ('v' and the view's body) shows the case withheld already.

create function service.without_privacy_details(data jsonb) returns jsonb language sql immutable as $$
  select case
    when jsonb_typeof(data) = 'array' and data->>14 = 'true' then
      jsonb_set(jsonb_set(jsonb_set(jsonb_set(jsonb_set(jsonb_set(data,
        '{5}', 'null'), '{8}', 'null'), '{9}', 'null'), '{10}', 'null'), '{11}', 'null'), '{12}', 'null')
    when jsonb_typeof(data) = 'object' and data->>'privacy_case' = 'true' then
      (select coalesce(jsonb_object_agg(k, case when k in ('person_name', 'worker_id', 'location', 'description',
                                                          'body_part', 'injury_type') then 'null'::jsonb else v end), '{}')
         from jsonb_each(data) as e(k, v))
    else data
  end
$$;

do $$
declare
  keys text[];
  last_key text := '';
  tries int := 0;
begin
  loop
    select array_agg(key order by key) into keys
      from (select key from service.rows where tbl = 'incidents' and key > last_key order by key limit 1000) b;
    exit when keys is null;
    begin
      update service.rows r set data = service.without_privacy_details(r.data::jsonb)::text
       where r.tbl = 'incidents' and r.key = any(keys) and left(r.data, 1) in ('[', '{')
         and service.without_privacy_details(r.data::jsonb) is distinct from r.data::jsonb;
    exception when lock_not_available or deadlock_detected then
      tries := tries + 1;
      if tries > 600 then raise; end if;
      perform pg_sleep(0.05);
      continue;
    end;
    tries := 0;
    last_key := keys[array_length(keys, 1)];
    commit;
  end loop;
end $$;

-- A held incident's row before it was held is compared by the event rules only: none of it is kept.
update service.capture_quarantine set before = (before::jsonb - array['person_name', 'worker_id', 'location',
  'description', 'body_part', 'injury_type'])::text
 where tbl = 'incidents' and before is not null;

drop function service.without_privacy_details(jsonb);
