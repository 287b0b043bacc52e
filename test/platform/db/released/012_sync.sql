-- Keeping a copy in step (issue 15): what changed since, and what was deleted since.

-- updated_at: the record's own updatedAt field (null for inspections, which have none).
-- changed_at: when the record last changed as the API shows it, the key of ?sort=updatedAt
-- and of updatedAfter/updatedBefore. It is the record's updatedAt whenever a change brings a
-- new one; a change that leaves updatedAt alone (an audit item, an acknowledgement, a
-- subcontractor document, the equipment or site name inside an inspection, any change of an
-- inspection) moves it to the commit time, and always forward, so that a sync that asks for
-- changes after the last one it saw gets the record again. Milliseconds, like every
-- timestamp the API shows, so that the value a client stores compares exactly.
-- Rows written by anything but projection (tests, benchmarks) get the time of writing.
alter table service.views
  add column updated_at timestamptz,
  add column changed_at timestamptz not null default date_trunc('milliseconds', now());

-- Views stored before this migration: the record's updatedAt, else its createdAt.
update service.views v
   set updated_at = u.at, changed_at = coalesce(u.at, v.created_at)
  from (
    select resource, id,
           case when body::json->>'updatedAt' ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$'
                then (body::json->>'updatedAt')::timestamptz end as at
      from service.views
  ) u
 where u.resource = v.resource and u.id = v.id;

create index views_changed on service.views (company_id, resource, changed_at, id);

-- Tombstones: a record whose view capture deleted (its row was deleted in the app, or a
-- rebuild found it gone), for GET /api/v1/deletions. Kept 30 days (the delivery engine's
-- retention pass prunes older ones); a record that comes back loses its tombstone.
create table service.deletions (
  resource text not null,
  id uuid not null,
  company_id uuid not null,
  deleted_at timestamptz not null,     -- the commit time of the deletion, in milliseconds
  primary key (resource, id)
);
create index deletions_page on service.deletions (company_id, resource, deleted_at, id);
create index deletions_all_page on service.deletions (company_id, deleted_at, id);
create index deletions_age on service.deletions (deleted_at);
