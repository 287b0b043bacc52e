-- migrate: steps
-- migrate: equivalent-to 917d03d0184b1368b765ba6832acd1eb70cce8bb8d2c55855505de9cb2a17e26
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): the new index is
-- built concurrently under another name, the old one dropped concurrently, the new one renamed.
-- The events feed's index, ascending (read backwards for the feed's newest-first pages, at the
-- same cost). Events arrive in commit order, newest last: in a descending index each one lands
-- at the left end of its company's range, where a full page splits in two half-full ones; in an
-- ascending one it lands at the right end, where PostgreSQL splits a page leaving it full
-- (docs/benchmarks.md, "Big tenants").
create index concurrently if not exists events_page_ascending on service.events (company_id, created_at, id);
drop index concurrently if exists service.events_page;
alter index service.events_page_ascending rename to events_page;
