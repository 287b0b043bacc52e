-- The views' three page indexes keyed by a resource's number, not its name: 'corrective-actions'
-- took 19 bytes of each entry (with its alignment, 16 more than a smallint), in three entries per
-- record (docs/benchmarks.md, "Big tenants"). The read API's statements name the same expression
-- (src/read/views.ts), so PostgreSQL reads the same ranges, in the same order.
--
-- Append-only: a resource the service comes to serve takes the next number. Changing a number
-- would misplace every entry indexed under it (the function is declared immutable).
create function service.resource_no(resource text) returns smallint language sql immutable parallel safe as $$
  select (case resource
    when 'incidents' then 1 when 'observations' then 2 when 'corrective-actions' then 3 when 'audits' then 4
    when 'inspections' then 5 when 'training-records' then 6 when 'workers' then 7 when 'job-sites' then 8
    when 'changes' then 9 when 'permits' then 10 when 'policies' then 11 when 'sds' then 12
    when 'risk-assessments' then 13 when 'subcontractors' then 14
  end)::smallint
$$;

drop index service.views_page;
create index views_page on service.views (company_id, service.resource_no(resource), created_at desc, id desc);
drop index service.views_status_page;
create index views_status_page on service.views (company_id, service.resource_no(resource), status, created_at desc, id desc)
  where status is not null;
drop index service.views_changed;
create index views_changed on service.views (company_id, service.resource_no(resource), changed_at, id);
