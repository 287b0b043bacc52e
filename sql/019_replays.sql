-- migrate: accepts f19a7916f353e9fd9ea1e10803f0cc4e2a2054a349461b867e67da2286a7d3ce
-- Issue 16.5/16.6: replays as stored jobs, paced per destination in their own lane, and a
-- warning in the activity log before an endpoint is switched off.

-- A replay: what an admin (API, pages) or an operator (CLI) asked to send again, the plan it
-- made (what its dry run showed), and how far it is. Its deliveries are not touched when it
-- is made: the replay lane (src/webhooks/replay/lane.ts) hands them to the engine a few at
-- a time, at REPLAY_RATE per destination, so live deliveries never queue behind a replay.
create table service.webhook_replays (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null,
  endpoint_id uuid references service.webhook_endpoints (id) on delete cascade,
  subscription_id uuid references service.webhook_subscriptions (id) on delete cascade,
  since timestamptz not null,
  until timestamptz not null,           -- exclusive
  events text[] not null,
  failed_only boolean not null,
  source text not null check (source in ('api', 'pages', 'cli')),
  actor_id uuid,                        -- null: the service (a CLI replay without --as)
  actor_email text,
  -- The plan, as the dry run counts it.
  matched integer not null,             -- events of the destination's company and kinds in the range
  planned_resend integer not null,      -- existing deliveries sent again with their own id
  planned_create integer not null,      -- events the destination never had a delivery for
  skipped_delivered integer not null,   -- already delivered (failed only)
  skipped_in_flight integer not null,   -- being attempted when it was made
  total integer not null,               -- items queued: planned_resend + planned_create
  -- Progress: items 1 .. next_seq - 1 have been handed to the engine (or skipped).
  next_seq integer not null default 1,
  released integer not null default 0,  -- handed to the engine, not attempted yet
  sent integer not null default 0,      -- attempted at least once since they were handed over
  skipped integer not null default 0,   -- found being attempted, delivered meanwhile, or gone
  restored integer not null default 0,  -- handed over but not attempted when it was cancelled: put back
  paced_at timestamptz,                 -- the pacing clock: releases are due at REPLAY_RATE from it
  state text not null default 'running' check (state in ('running', 'finished', 'cancelled')),
  created_at timestamptz not null default now(),
  finished_at timestamptz,              -- finished or cancelled
  cancelled_by_id uuid,
  cancelled_by_email text,
  check (num_nonnulls(endpoint_id, subscription_id) = 1)
);
create index webhook_replays_company on service.webhook_replays (company_id, created_at desc, id desc);
create index webhook_replays_running on service.webhook_replays (created_at, id) where state = 'running';
create index webhook_replays_endpoint on service.webhook_replays (endpoint_id) where endpoint_id is not null;
create index webhook_replays_subscription on service.webhook_replays (subscription_id) where subscription_id is not null;

-- A running replay's deliveries, in event order. A queued item changed nothing yet; a
-- released one keeps what its delivery was before (prior_*), so a cancel puts an unattempted
-- delivery back as it was (or deletes the one the release made). Deleted once the replay ends.
create table service.webhook_replay_items (
  replay_id uuid not null references service.webhook_replays (id) on delete cascade,
  seq integer not null,
  event_id uuid not null,
  delivery_id uuid,                     -- the delivery it resends; set at release when it makes one
  state text not null default 'queued' check (state in ('queued', 'released', 'sent', 'skipped', 'restored')),
  made boolean not null default false,  -- the release made the delivery
  attempts_before integer,              -- the delivery's attempts when released: more means sent
  prior_state text,
  prior_next_attempt_at timestamptz,
  prior_manual boolean,
  prior_held_reason text,
  prior_finished_at timestamptz,
  primary key (replay_id, seq)
);
create index webhook_replay_items_released on service.webhook_replay_items (replay_id) where state = 'released';

-- Issue 16.6: ten deliveries in a row that failed every attempt (fifteen switch the endpoint
-- off) write one warning to the activity log, once per streak: when the count crosses ten.
-- A trigger, so whichever engine keeps the count (src/delivery/queries.ts) warns the same.
-- An update that also switches the endpoint off logs the switch-off only.
create function service.webhook_endpoint_failing() returns trigger
language plpgsql as $$
declare
  last record;
begin
  select d.last_status, d.last_error into last from service.webhook_deliveries d
  where d.endpoint_id = new.id and d.state = 'failed' order by d.created_at desc limit 1;
  insert into service.activity (company_id, kind, subject_id, details)
  values (new.company_id, 'endpoint.failing', new.id::text, jsonb_build_object(
    'consecutiveFailures', new.consecutive_failures, 'switchOffAt', 15,
    'lastStatus', last.last_status, 'lastError', last.last_error, 'by', 'service'));
  return null;
end $$;

create trigger webhook_endpoints_failing after update of consecutive_failures on service.webhook_endpoints
  for each row when (old.consecutive_failures < 10 and new.consecutive_failures >= 10 and new.enabled)
  execute function service.webhook_endpoint_failing();
