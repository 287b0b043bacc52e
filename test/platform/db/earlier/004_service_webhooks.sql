-- Webhooks: admin-made endpoints, API-made subscriptions, and the durable delivery
-- schedule. Signing secrets are AES-256-GCM blobs (src/delivery/secrets.ts), never plain.

-- Endpoints an admin adds in the app (CLI, /admin/v1).
create table service.webhook_endpoints (
  id uuid primary key,                 -- made by the service: the secret's blob is bound to it
  company_id uuid not null,
  name text not null check (length(name) between 1 and 200),
  url text not null,                   -- normalised https URL, checked at creation
  events text[] not null check (cardinality(events) > 0),
  secret bytea not null,               -- encrypted whsec_..., context 'endpoint:<id>'
  secret_rotated_at timestamptz,
  enabled boolean not null default true,
  disabled_reason text,                -- why it was switched off, shown to the admin
  disabled_at timestamptz,
  consecutive_failures integer not null default 0, -- deliveries in a row that failed every attempt
  created_at timestamptz not null default now(),
  created_by uuid,
  created_by_email text,
  updated_at timestamptz not null default now()
);
create index webhook_endpoints_company on service.webhook_endpoints (company_id, created_at desc, id desc);

-- One signing secret per API key, shared by all of that key's subscriptions (spec 4.1 rule 6).
create table service.webhook_key_secrets (
  key_id uuid primary key references service.api_keys (id) on delete cascade,
  secret bytea not null,               -- encrypted whsec_..., context 'key:<key id>'
  created_at timestamptz not null default now()
);

-- Subscriptions a key made through POST /api/v1/hooks.
create table service.webhook_subscriptions (
  id uuid primary key default gen_random_uuid(),
  key_id uuid not null references service.api_keys (id) on delete cascade,
  company_id uuid not null,
  url text not null,                   -- normalised https URL
  event text not null,
  active boolean not null default true, -- an admin can turn it off
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (key_id, url, event)          -- a repeated subscribe finds the existing one
);
create index webhook_subscriptions_company on service.webhook_subscriptions (company_id, event);

-- How far the outbox has been fanned out into deliveries. One row; locked by each fan-out
-- transaction, so every event is fanned out once even with several service processes.
create table service.webhook_fanout (
  id boolean primary key default true check (id),
  commit_lsn pg_lsn not null,
  seq integer not null
);
-- Start after the events that exist now: endpoints made later never receive older events.
insert into service.webhook_fanout (commit_lsn, seq)
select coalesce((select commit_lsn from service.events order by commit_lsn desc, seq desc limit 1), '0/0'),
       coalesce((select seq from service.events order by commit_lsn desc, seq desc limit 1), 0);

-- One delivery per (event, destination); its id is the Service-Delivery id and never changes.
--   pending:   due at next_attempt_at, unless leased (lease_until in the future); a crashed
--              worker's delivery falls due again when its lease runs out
--   held:      resting, its destination is off (endpoint switched off, subscription off,
--              API or module off, key expired...); released when it is eligible again
--   succeeded, failed: finished; Send Again makes either pending again with the same id
create table service.webhook_deliveries (
  id uuid primary key default gen_random_uuid(),
  event_id uuid not null references service.events (id) on delete cascade,
  company_id uuid not null,
  event text not null,
  endpoint_id uuid references service.webhook_endpoints (id) on delete cascade,
  subscription_id uuid references service.webhook_subscriptions (id) on delete cascade,
  origin text not null,                -- host:port of the destination, for per-receiver concurrency
  state text not null default 'pending' check (state in ('pending', 'held', 'succeeded', 'failed')),
  attempts integer not null default 0,
  next_attempt_at timestamptz,
  lease_until timestamptz,
  leased_by uuid,                      -- the engine instance holding the lease
  manual boolean not null default false, -- Send Again of a finished delivery: one attempt, no schedule
  held_reason text,
  last_status integer,
  last_error text,
  last_attempt_at timestamptz,
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  check (num_nonnulls(endpoint_id, subscription_id) = 1),
  check ((state = 'pending') = (next_attempt_at is not null))
) with (fillfactor = 80); -- room for claims to update in place (HOT: lease columns are not indexed)
-- Stable ids: one delivery per event and destination. Partial, so each row feeds one of them.
create unique index webhook_deliveries_event_endpoint on service.webhook_deliveries (event_id, endpoint_id)
  where endpoint_id is not null;
create unique index webhook_deliveries_event_subscription on service.webhook_deliveries (event_id, subscription_id)
  where subscription_id is not null;
create index webhook_deliveries_due on service.webhook_deliveries (next_attempt_at) where state = 'pending';
create index webhook_deliveries_held on service.webhook_deliveries (created_at) where state = 'held';
create index webhook_deliveries_subscription on service.webhook_deliveries (subscription_id)
  where subscription_id is not null;
create index webhook_deliveries_endpoint on service.webhook_deliveries (endpoint_id, created_at desc, id desc)
  where endpoint_id is not null;
-- For retention: rows arrive in created_at order, so a block range index is enough and costs
-- nothing per update.
create index webhook_deliveries_created on service.webhook_deliveries using brin (created_at);
-- A queue table: many updates per row. Vacuum and analyze it early.
alter table service.webhook_deliveries set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- The next due deliveries, oldest first, locked for the caller; rows other processes hold
-- are skipped. Always an ordered walk of the due index that stops after p_limit rows: a
-- backlog fanned out moments ago has no statistics yet, and a bitmap scan and sort of the
-- whole backlog per claim would make claiming slower the more there is to send.
-- It returns the locked rows' own columns: a caller reading the table again could see an
-- older version of a row (its statement snapshot predates this function's), and lease a
-- delivery with a stale attempt count.
create function service.webhook_due(p_now timestamptz, p_skip text[], p_limit integer)
returns table (id uuid, event_id uuid, company_id uuid, event text, endpoint_id uuid, subscription_id uuid,
  origin text, attempts integer, manual boolean, next_attempt_at timestamptz)
language sql volatile
rows 32
set enable_bitmapscan = off
set enable_seqscan = off
set enable_sort = off
as $$
  select d.id, d.event_id, d.company_id, d.event, d.endpoint_id, d.subscription_id, d.origin, d.attempts, d.manual,
    d.next_attempt_at
  from service.webhook_deliveries d
  where d.state = 'pending' and d.next_attempt_at <= p_now and (d.lease_until is null or d.lease_until <= p_now)
    and d.origin <> all(p_skip)
  order by d.next_attempt_at
  limit p_limit
  for update skip locked
$$;

-- Every attempt of a delivery, for the delivery log.
create table service.webhook_attempts (
  id bigint generated always as identity primary key,
  delivery_id uuid not null references service.webhook_deliveries (id) on delete cascade,
  number integer not null,             -- 1-based, over the schedule and any Send Again
  started_at timestamptz not null,
  duration_ms integer not null,
  status integer,                      -- the receiver's HTTP status, when it answered
  error text,                          -- null on success
  error_kind text,                     -- sender.ts SendErrorKind
  response_snippet text,               -- the start of the answer (bounded)
  unique (delivery_id, number)
);
create index webhook_attempts_started on service.webhook_attempts (started_at);

-- Revoking a key deletes its subscriptions (spec 3.2, 5.6) in the revocation's transaction,
-- and logs each one as deleted by whoever revoked the key.
create function service.webhook_key_revoked() returns trigger
language plpgsql as $$
begin
  insert into service.activity (company_id, actor_id, actor_email, kind, subject_id, details)
  select s.company_id, new.revoked_by, new.revoked_by_email, 'subscription.deleted', s.id::text,
         jsonb_build_object('reason', 'key revoked', 'keyId', new.id, 'url', s.url, 'event', s.event)
  from service.webhook_subscriptions s where s.key_id = new.id;
  delete from service.webhook_subscriptions where key_id = new.id;
  delete from service.webhook_key_secrets where key_id = new.id;
  return null;
end $$;

create trigger api_keys_revoked_webhooks
  after update of revoked_at on service.api_keys
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function service.webhook_key_revoked();
