-- migrate: fence 0.4.0
-- Receivers are told and choose what they get (docs/events.md#failure-alerts,
-- docs/events.md#content-filters, docs/events.md#thin-payloads): a content filter and a payload
-- mode per destination, the alert state of each destination, the alert events' own rows and
-- the alert mails still to send. Columns are added without a rewrite (no default, or a
-- constant one); the new tables are empty. An engine of an older release would send every
-- event to a filtered destination and whole bodies to a thin one: fenced.

-- filter: a JSON object over the fields of an event's data (src/domain/filters/filter.ts);
-- null: every event. payload 'thin': {id, companyId, url} of the record instead of the record.
-- failing_since: set by webhook.failing, cleared by webhook.recovered (one event per change).
alter table service.webhook_endpoints
  add column filter jsonb,
  add column payload text not null default 'full' check (payload in ('full', 'thin')),
  add column failing_since timestamptz;
alter table service.webhook_subscriptions
  add column filter jsonb,
  add column payload text not null default 'full' check (payload in ('full', 'thin')),
  add column failing_since timestamptz;

-- The engine hands back what it holds when a destination changes (sql/010, sql/024): its
-- filter and payload mode count too.
drop trigger webhook_endpoints_changed on service.webhook_endpoints;
create trigger webhook_endpoints_changed after update on service.webhook_endpoints for each row
  when ((old.url, old.secret, old.previous_secret, old.previous_secret_expires_at, old.events, old.enabled, old.rate_limit,
      old.ordering, old.filter, old.payload)
    is distinct from (new.url, new.secret, new.previous_secret, new.previous_secret_expires_at, new.events, new.enabled,
      new.rate_limit, new.ordering, new.filter, new.payload))
  execute function service.notify_webhook_destinations();
drop trigger webhook_subscriptions_changed on service.webhook_subscriptions;
create trigger webhook_subscriptions_changed after update on service.webhook_subscriptions for each row
  when ((old.url, old.event, old.active, old.rate_limit, old.ordering, old.filter, old.payload)
    is distinct from (new.url, new.event, new.active, new.rate_limit, new.ordering, new.filter, new.payload))
  execute function service.notify_webhook_destinations();

-- Every engine keeps the failing destinations in memory (a success of one is its recovery):
-- a change of failing_since tells them at commit.
create function service.notify_webhook_alerts() returns trigger
language plpgsql as $$
begin
  perform pg_notify('service_webhook_alerts', '');
  return null;
end
$$;
create trigger webhook_endpoints_failing_changed after update of failing_since on service.webhook_endpoints for each row
  when (old.failing_since is distinct from new.failing_since) execute function service.notify_webhook_alerts();
create trigger webhook_subscriptions_failing_changed after update of failing_since on service.webhook_subscriptions
  for each row when (old.failing_since is distinct from new.failing_since) execute function service.notify_webhook_alerts();

-- Alert events are about destinations, not the app's records: they are not in the app's WAL.
-- They sit in service.events at commit_lsn 0/0 with a negative seq from this sequence, before
-- every fan-out cursor, so the outbox's partition readers never read them; their writer makes
-- their deliveries itself, due at once, in the transaction that writes them, and from there
-- claim, signing, retries, Send Again, replay and retention treat them like every event.
create sequence service.webhook_alert_seq as integer minvalue -2147483647 maxvalue -1 start with -2147483647;

-- One row per alert event: which destination it is about (and for a subscription, its key:
-- the events feed shows a key only the alerts about its own subscriptions).
create table service.webhook_alerts (
  event_id uuid primary key,
  company_id uuid not null,
  kind text not null check (kind in ('webhook.failing', 'webhook.recovered', 'webhook.switched_off')),
  endpoint_id uuid,
  subscription_id uuid,
  key_id uuid,
  created_at timestamptz not null default now(),
  check (num_nonnulls(endpoint_id, subscription_id) = 1)
);
create index webhook_alerts_key on service.webhook_alerts (key_id, created_at) where key_id is not null;
create index webhook_alerts_created on service.webhook_alerts (created_at);

-- Alert mails (SMTP_URL): one per alert event and recipient list, kept until sent. At most 20
-- a company an hour are sent one by one; the rest wait and go as one summary. A mail server
-- that is down delays them (next_attempt_at), never drops them.
create table service.alert_mails (
  id bigint generated always as identity primary key,
  company_id uuid not null,
  event_id uuid,                        -- null for a summary
  recipients text[] not null,
  subject text not null,
  body text not null,
  state text not null default 'pending' check (state in ('pending', 'sent', 'summarized')),
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  last_error text,
  held_back boolean not null default false, -- over the hourly limit: goes in the next summary
  created_at timestamptz not null default now(),
  sent_at timestamptz,
  summary_id bigint                     -- the summary mail that carried it
);
create unique index alert_mails_event on service.alert_mails (event_id) where event_id is not null;
create index alert_mails_pending on service.alert_mails (next_attempt_at) where state = 'pending';
create index alert_mails_sent on service.alert_mails (company_id, sent_at) where state = 'sent';
