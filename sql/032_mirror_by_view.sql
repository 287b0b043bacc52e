-- migrate: fence 0.2.0
-- A mirror row its view stands for (docs/design.md, "A view that stands for its mirror row"):
-- a record whose API body reads back as exactly its row has no row in service.rows; the mirror
-- reads it from service.views. Capture decides that as it writes a view and its row together
-- (it says so with the setting service.keeps_mirror, for its transaction). Any other writer
-- that changes or removes such a view (a rebuild of the views after the service's shapes
-- changed) keeps the mirror whole through these triggers: the old body goes into
-- service.rows first, marked "v", in the same transaction, where the service reads it back
-- as the row it stood for.

-- The resources whose views may stand for their rows, with their app table: records of their
-- own, with no parent row (src/pipeline/projection/by-view.ts, VIEW_BACKED; a test checks the two
-- lists agree).
create function service.view_backed_table(resource text) returns text language sql immutable as $$
  select case resource
    when 'job-sites' then 'job_sites' when 'workers' then 'workers' when 'incidents' then 'incidents'
    when 'observations' then 'observations' when 'corrective-actions' then 'corrective_actions'
    when 'audits' then 'audits' when 'training-records' then 'training_records' when 'changes' then 'changes'
    when 'permits' then 'permits' when 'policies' then 'policies' when 'sds' then 'sds'
    when 'risk-assessments' then 'risk_assessments' when 'subcontractors' then 'subcontractors'
  end
$$;

create function service.mirror_keep_changed_views() returns trigger language plpgsql as $$
begin
  if current_setting('service.keeps_mirror', true) = 'on' then return null; end if;
  insert into service.rows (tbl, key, company_id, parent_id, data)
  select service.view_backed_table(o.resource), o.id::text, o.company_id, null, 'v' || o.body
    from old_views o join new_views n on n.resource = o.resource and n.id = o.id
   where (n.body is distinct from o.body or n.company_id is distinct from o.company_id)
     and service.view_backed_table(o.resource) is not null
  on conflict (tbl, key) do nothing;
  return null;
end $$;

create function service.mirror_keep_deleted_views() returns trigger language plpgsql as $$
begin
  if current_setting('service.keeps_mirror', true) = 'on' then return null; end if;
  insert into service.rows (tbl, key, company_id, parent_id, data)
  select service.view_backed_table(o.resource), o.id::text, o.company_id, null, 'v' || o.body
    from old_views o
   where service.view_backed_table(o.resource) is not null
  on conflict (tbl, key) do nothing;
  return null;
end $$;

create function service.mirror_keep_all_views() returns trigger language plpgsql as $$
begin
  if current_setting('service.keeps_mirror', true) = 'on' then return null; end if;
  insert into service.rows (tbl, key, company_id, parent_id, data)
  select service.view_backed_table(v.resource), v.id::text, v.company_id, null, 'v' || v.body
    from service.views v
   where service.view_backed_table(v.resource) is not null
  on conflict (tbl, key) do nothing;
  return null;
end $$;

-- Until now every view had its row stored: a view of these resources without one was left by
-- a version that missed a delete. From here such a view would read as its record's row, so it
-- goes now, with a tombstone, as the views' rebuild would remove it.
with d as (
  delete from service.views v
   where service.view_backed_table(v.resource) is not null
     and not exists (select 1 from service.rows r
                      where r.tbl = service.view_backed_table(v.resource) and r.key = v.id::text)
  returning v.resource, v.id, v.company_id
)
insert into service.deletions (resource, id, company_id, deleted_at)
select resource, id, company_id, date_trunc('milliseconds', now()) from d
on conflict (resource, id) do update set company_id = excluded.company_id, deleted_at = excluded.deleted_at;

create trigger views_keep_mirror_on_update after update on service.views
  referencing old table as old_views new table as new_views
  for each statement execute function service.mirror_keep_changed_views();
create trigger views_keep_mirror_on_delete after delete on service.views
  referencing old table as old_views
  for each statement execute function service.mirror_keep_deleted_views();
create trigger views_keep_mirror_on_truncate before truncate on service.views
  for each statement execute function service.mirror_keep_all_views();
