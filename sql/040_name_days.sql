-- migrate: steps
-- migrate: equivalent-to 264a661b14b7d3f1d832c378dcbc40adce00005b5164f7e6a47c097984429772
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): the index is
-- built and the one it replaces dropped concurrently.
-- The name filter's trigram index also knows each record's company, resource and creation day
-- (docs/design.md, "A list's plan does not wait for statistics"). A name common in a company
-- but absent from its newest records is looked for day range by day range, newest first:
-- the index gives the matches of those days only, so the rows read are about a page's worth,
-- not every match the company has. Each record has three keys, its day and the 16-day and
-- 256-day spans that hold it, so that any range of days is a few dozen keys
-- (src/read/lists.ts, dayKeys). Both functions are inlined: built of immutable parts only
-- (a timestamptz's difference, not its fields, and text concatenated as text), the index
-- matches the statement's expression and PostgreSQL never calls a function per row.
create or replace function service.view_days(t timestamptz, width int) returns bigint
  language sql immutable parallel safe
  as $$select floor(extract(epoch from t - timestamptz '1970-01-01 00:00:00+00') / (86400 * width))::bigint$$;

create or replace function service.name_days(company_id uuid, resource text, created_at timestamptz) returns text[]
  language sql immutable parallel safe
  as $$select array[
    company_id::text || '/' || resource || '/1/' || service.view_days(created_at, 1)::text,
    company_id::text || '/' || resource || '/16/' || service.view_days(created_at, 16)::text,
    company_id::text || '/' || resource || '/256/' || service.view_days(created_at, 256)::text]$$;

create index concurrently if not exists views_name_days on service.views
  using gin (service.fold_name(name) gin_trgm_ops, service.name_days(company_id, resource, created_at))
  where name is not null;

-- The new index answers a name alone as well (its first column): one trigram index to keep
-- up to date, not two.
drop index concurrently if exists service.views_name_folded_trgm;

-- The walk along the page index a name filter starts with: the newest p_walk records of the
-- company's resource within the bounds, and of those the first p_lim whose name matches,
-- newest first. When fewer match, one more row without a body: the walk's last record, where
-- the day ranges go on from (src/read/views.ts), the days of the walk's first and last
-- records, and the day of the oldest record within the bounds; none when the walk saw every
-- record. The resource is named by its number too, which keys views_page (sql/034). Sorting
-- is off in here: PostgreSQL
-- would otherwise choose between this ordered read of views_page and sorting every record of
-- the company by its statistics, and right after an import, told the company was small, it
-- sorted 200,000 workers on disk (200-600 ms a list); without a sort the ordered read is the
-- only plan.
create or replace function service.name_walk(p_ok boolean, p_company uuid, p_resource text, p_after timestamptz,
                                  p_before timestamptz, p_at timestamptz, p_at_id uuid, p_pattern text,
                                  p_walk int, p_lim int)
  returns table (id text, body text, ts text, first_day bigint, last_day bigint, oldest_day bigint)
  language plpgsql stable
  set enable_sort = off
  set enable_incremental_sort = off
as $$
#variable_conflict use_column
declare
  found_rows int;
begin
  if not p_ok then
    return;
  end if;
  return query
    select v.id::text, v.body, v.created_at::text, null::bigint, null::bigint, null::bigint
      from (select v.id, v.name, v.body, v.created_at from service.views v
             where v.company_id = p_company and v.resource = p_resource and service.resource_no(v.resource) = service.resource_no(p_resource)
               and v.created_at > p_after and v.created_at < p_before and (v.created_at, v.id) < (p_at, p_at_id)
             order by v.created_at desc, v.id desc
             limit p_walk) v
     where v.name is not null and service.fold_name(v.name) like service.fold_name(p_pattern)
     order by v.created_at desc, v.id desc
     limit p_lim;
  get diagnostics found_rows = row_count;
  if found_rows < p_lim then
    return query
      select b.id::text, null::text, b.created_at::text,
             (select service.view_days(f.created_at, 1) from service.views f
               where f.company_id = p_company and f.resource = p_resource and service.resource_no(f.resource) = service.resource_no(p_resource)
                 and f.created_at > p_after and f.created_at < p_before and (f.created_at, f.id) < (p_at, p_at_id)
               order by f.created_at desc, f.id desc
               limit 1),
             service.view_days(b.created_at, 1),
             (select service.view_days(o.created_at, 1) from service.views o
               where o.company_id = p_company and o.resource = p_resource and service.resource_no(o.resource) = service.resource_no(p_resource)
                 and o.created_at > p_after and o.created_at < p_before and (o.created_at, o.id) < (p_at, p_at_id)
               order by o.created_at, o.id
               limit 1)
        from (select v.id, v.created_at from service.views v
               where v.company_id = p_company and v.resource = p_resource and service.resource_no(v.resource) = service.resource_no(p_resource)
                 and v.created_at > p_after and v.created_at < p_before and (v.created_at, v.id) < (p_at, p_at_id)
               order by v.created_at desc, v.id desc
               offset p_walk - 1
               limit 1) b;
  end if;
end $$;
