-- Delivery health (docs/events.md#delivery-health): a destination's deliveries by hour and
-- outcome, and the times of their attempts, for the charts of the admin pages and the portal.
-- A finished delivery no longer changes, except by Send Again or a replay, and no delivery is
-- made in an hour that has ended: the reader keeps each past hour here once (its finished
-- deliveries, and the ids of those still being sent) and then reads live only the hour under
-- way and those ids, so a chart of an endpoint with 100,000 deliveries a week reads a few
-- hundred rows (bench/health.ts). A cache: losing it loses nothing.
create table service.webhook_health_hours (
  destination_id uuid not null,        -- an endpoint's or a subscription's id
  hour timestamptz not null,           -- where the hour starts
  succeeded integer not null,          -- at the first attempt
  retried integer not null,            -- after more than one
  failed integer not null,             -- every attempt failed
  times integer[] not null,            -- their attempts' times: pairs of (milliseconds, bucket's top; how many)
  open uuid[] not null,                -- deliveries of the hour still being sent (or held) when it was kept: read live
  computed_at timestamptz not null default now(),
  primary key (destination_id, hour)
);

-- A finished delivery sent again (Send Again, a replay) changes its hour: the hour is read live
-- again and kept anew. The reader of a destination's health takes the same lock while it reads
-- and keeps hours, so what it found finished is never kept after such a change committed beside
-- it. Deliveries still being sent never fire this (they are read live, by id).
create function service.webhook_health_stale() returns trigger
language plpgsql as $$
declare
  dest uuid := coalesce(old.endpoint_id, old.subscription_id);
begin
  perform pg_advisory_xact_lock(hashtextextended('webhook_health:' || dest::text, 0));
  delete from service.webhook_health_hours
   where destination_id = dest and hour = date_bin('1 hour', old.created_at, timestamptz '1970-01-01 00:00:00+00');
  return null;
end $$;

create trigger webhook_deliveries_health_stale after update of state on service.webhook_deliveries
  for each row when (old.state in ('succeeded', 'failed') and new.state is distinct from old.state)
  execute function service.webhook_health_stale();

-- A destination deleted takes its hours with it.
create function service.webhook_health_gone() returns trigger
language plpgsql as $$
begin
  delete from service.webhook_health_hours h using gone g where h.destination_id = g.id;
  return null;
end $$;
create trigger webhook_endpoints_deleted_health after delete on service.webhook_endpoints
  referencing old table as gone for each statement execute function service.webhook_health_gone();
create trigger webhook_subscriptions_deleted_health after delete on service.webhook_subscriptions
  referencing old table as gone for each statement execute function service.webhook_health_gone();
