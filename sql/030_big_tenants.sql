-- migrate: accepts f80989e23b26829636daca91512d1d5bbd506996aa8530e6ad1433a2a66c83a4
-- A company of a million records, imported in a few minutes (docs/design.md, "A list's plan does not wait for statistics"):
-- the tables capture fills are analyzed and vacuumed after a fiftieth of their rows changed,
-- not the default fifth or tenth. At a million rows the defaults wait for 100,000 to 200,000
-- changes; meanwhile the planner reasons about a table a fraction of its size, and rows
-- inserted but never vacuumed are not all-visible (index-only scans go to the heap).
-- The read API's statements do not depend on these statistics for their plans (each list
-- reads a range of an index it names: src/read/views.ts); the rest of the service's queries
-- (the delivery engine's, housekeeping's) do, and fresher ones are cheap: an ANALYZE samples
-- the same 30,000 rows whatever the table's size.
alter table service.views set (
  autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000,
  autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
alter table service.rows set (
  autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000,
  autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
alter table service.events set (
  autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000,
  autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
alter table service.deletions set (
  autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000,
  autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
