-- migrate: fence 0.2.0
-- migrate: steps
-- migrate: equivalent-to 22b04b9a3b58590b4d0bdab34b4ac966740830071f092d0e548ba83a082ae896
-- migrate: allows adding-field-with-default (blocks reads and writes of service.views for under 10 ms, a catalog change): the default, date_trunc of now(), is stable, not volatile, so PostgreSQL rewrites no row
-- Keeping a copy in step: what changed since, and what was deleted since.
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): the columns are added
-- without a rewrite (their defaults are not volatile), the views are filled in batches that
-- commit, the index is built concurrently. A capture of an older release writes no tombstone and
-- no change time: fenced.

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
  add column if not exists updated_at timestamptz,
  add column if not exists changed_at timestamptz not null default date_trunc('milliseconds', now());

-- Views stored before this migration: the record's updatedAt, else its createdAt; 1,000 a
-- batch in key order, each batch committed. A batch that waits for a view capture holds gives
-- way (lock_timeout, set by the runner) and is tried again, so capture never waits for more
-- than a batch. A batch's keys are read first and its views updated by those keys: a range of
-- (resource, id) is estimated by resource alone, and planned as a read of the whole table.
do $$
declare
  resources text[];
  ids uuid[];
  last_resource text := '';
  last_id uuid := '00000000-0000-0000-0000-000000000000';
  tries int := 0;
begin
  loop
    execute 'select array_agg(b.resource order by b.resource, b.id), array_agg(b.id order by b.resource, b.id)
               from (select v.resource, v.id from service.views v where (v.resource, v.id) > ($1, $2)
                      order by v.resource, v.id limit 1000) b'
      into resources, ids using last_resource, last_id;
    exit when resources is null;
    begin
      execute $u$
        update service.views v
           set updated_at = u.at, changed_at = coalesce(u.at, v.created_at)
          from (
            select k.resource, k.id,
                   case when x.body::json->>'updatedAt' ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$'
                        then (x.body::json->>'updatedAt')::timestamptz end as at
              from unnest($1::text[], $2::uuid[]) as k(resource, id)
              join service.views x on x.resource = k.resource and x.id = k.id
          ) u
         where u.resource = v.resource and u.id = v.id$u$
        using resources, ids;
    exception when lock_not_available or deadlock_detected then
      tries := tries + 1;
      if tries > 600 then raise; end if;
      perform pg_sleep(0.05);
      continue;
    end;
    tries := 0;
    last_resource := resources[array_length(resources, 1)];
    last_id := ids[array_length(ids, 1)];
    commit;
  end loop;
end $$;

create index concurrently if not exists views_changed on service.views (company_id, resource, changed_at, id);

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
