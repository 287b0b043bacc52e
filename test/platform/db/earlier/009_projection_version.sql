-- Which version of the record shapes the stored views (and so the API) are in. When the
-- service's shapes change (src/projection/version.ts), capture rebuilds every view from the
-- mirror at start, before it streams, so the API never mixes old and new shapes.
create table service.projection (
  id boolean primary key default true check (id),
  version integer not null
);
-- Views built before this table existed are version 1.
insert into service.projection (version) values (1);
