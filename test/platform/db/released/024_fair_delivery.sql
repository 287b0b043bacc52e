-- One company's dead receivers slow no one else (docs/design.md, "Fair sending"): a rate per
-- destination, ordering per record on request, and a circuit breaker per destination that
-- every engine process shares.

-- At most this many deliveries a second to the destination (live, retries, replays, Send
-- Again); null: no limit. ordering 'record': events of one record reach it in the order they
-- happened (a later one waits while an earlier one is retried).
alter table service.webhook_endpoints
  add column rate_limit double precision check (rate_limit >= 0.01 and rate_limit <= 1000),
  add column ordering text not null default 'none' check (ordering in ('none', 'record'));
alter table service.webhook_subscriptions
  add column rate_limit double precision check (rate_limit >= 0.01 and rate_limit <= 1000),
  add column ordering text not null default 'none' check (ordering in ('none', 'record'));

-- The engine hands back what it holds when a destination changes (sql/010, sql/018): its rate
-- and its ordering count too, so the next claim reads them as they now stand.
drop trigger webhook_endpoints_changed on service.webhook_endpoints;
create trigger webhook_endpoints_changed after update on service.webhook_endpoints for each row
  when ((old.url, old.secret, old.previous_secret, old.previous_secret_expires_at, old.events, old.enabled, old.rate_limit,
      old.ordering)
    is distinct from (new.url, new.secret, new.previous_secret, new.previous_secret_expires_at, new.events, new.enabled,
      new.rate_limit, new.ordering))
  execute function service.notify_webhook_destinations();
drop trigger webhook_subscriptions_changed on service.webhook_subscriptions;
create trigger webhook_subscriptions_changed after update on service.webhook_subscriptions for each row
  when ((old.url, old.event, old.active, old.rate_limit, old.ordering)
    is distinct from (new.url, new.event, new.active, new.rate_limit, new.ordering))
  execute function service.notify_webhook_destinations();

-- A delivery to a destination that orders by record carries its record ('<resource>:<id>'),
-- set when it is made; null otherwise. A claim leases it only when no earlier delivery of the
-- same record to the same destination is still pending, and only once fan-out has passed its
-- event everywhere (so an earlier event of the record has its row by then).
alter table service.webhook_deliveries add column ordering_key text;
create index webhook_deliveries_ordering on service.webhook_deliveries
  (coalesce(endpoint_id, subscription_id), ordering_key) where ordering_key is not null and state = 'pending';

-- The next due deliveries, as sql/004's webhook_due, skipping saturated destinations as well
-- as saturated origins, and returning the ordering key.
drop function service.webhook_due(timestamptz, text[], integer);
create function service.webhook_due(p_now timestamptz, p_skip text[], p_skip_dest uuid[], p_limit integer)
returns table (id uuid, event_id uuid, company_id uuid, event text, endpoint_id uuid, subscription_id uuid,
  origin text, attempts integer, manual boolean, next_attempt_at timestamptz, ordering_key text)
language sql volatile
rows 32
set enable_bitmapscan = off
set enable_seqscan = off
set enable_sort = off
as $$
  select d.id, d.event_id, d.company_id, d.event, d.endpoint_id, d.subscription_id, d.origin, d.attempts, d.manual,
    d.next_attempt_at, d.ordering_key
  from service.webhook_deliveries d
  where d.state = 'pending' and d.next_attempt_at <= p_now and (d.lease_until is null or d.lease_until <= p_now)
    and d.origin <> all(p_skip) and coalesce(d.endpoint_id, d.subscription_id) <> all(p_skip_dest)
  order by d.next_attempt_at
  limit p_limit
  for update skip locked
$$;

-- A destination's circuit, while it is not closed. After consecutive timeouts or connection
-- failures an engine opens it: attempts due meanwhile are not sent (recorded as failed, their
-- retry scheduled as for any failure), and from probe_at one engine sends a single attempt
-- (half_open, leased to it until probe_until). An answer closes it (the row goes); another
-- timeout opens it again with a longer wait. Times are the engine's clock.
create table service.webhook_circuits (
  endpoint_id uuid unique references service.webhook_endpoints (id) on delete cascade,
  subscription_id uuid unique references service.webhook_subscriptions (id) on delete cascade,
  company_id uuid not null,
  state text not null check (state in ('open', 'half_open')),
  failures integer not null,           -- timeouts or connection failures in a row that opened it
  opened_at timestamptz not null,
  probe_at timestamptz not null,       -- a probe may start from then
  probes integer not null default 0,   -- probes failed since it opened (the wait doubles with each)
  probe_by uuid,                       -- the engine sending the probe, while half_open
  probe_until timestamptz,
  last_error text,
  check (num_nonnulls(endpoint_id, subscription_id) = 1)
);
create index webhook_circuits_company on service.webhook_circuits (company_id);

-- Every engine keeps the circuits in memory: any change tells them at commit.
create function service.notify_webhook_circuits() returns trigger
language plpgsql as $$
begin
  perform pg_notify('service_webhook_circuits', '');
  return null;
end
$$;
create trigger webhook_circuits_changed after insert or update or delete on service.webhook_circuits
  for each statement execute function service.notify_webhook_circuits();
