-- migrate: accepts d3bbe322655300fc94dca4b4cb53bcba43ab3d599bec0cab6d5a9f519dbfa156
-- Which version of the record shapes the stored views (and so the API) are in. When the
-- service's shapes change (src/pipeline/projection/version.ts), capture rebuilds every view from the
-- mirror at start, before it streams, so the API never mixes old and new shapes.
create table service.projection (
  id boolean primary key default true check (id),
  version integer not null
);
-- Views built before this table existed are version 1.
insert into service.projection (version) values (1);
