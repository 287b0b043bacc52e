-- The events feed's index, ascending (read backwards for the feed's newest-first pages, at the
-- same cost). Events arrive in commit order, newest last: in a descending index each one lands
-- at the left end of its company's range, where a full page splits in two half-full ones; in an
-- ascending one it lands at the right end, where PostgreSQL splits a page leaving it full
-- (docs/benchmarks.md, "Big tenants").
drop index service.events_page;
create index events_page on service.events (company_id, created_at, id);
