-- Receivers see and recover their own deliveries through the read API (docs/api.md#your-deliveries).

-- A recovery a key asked for (POST /api/v1/hooks/{id}/recover) is a replay of its own
-- subscription on the replay lane, like an admin's; the key that started it is the only key
-- that reads it back (GET /api/v1/replays/{id}). null: an admin's or an operator's replay.
alter table service.webhook_replays add column key_id uuid;
create index webhook_replays_key on service.webhook_replays (key_id, subscription_id) where key_id is not null;

-- A subscription's delivery log, newest first and paged, as an endpoint's is
-- (webhook_deliveries_endpoint): a page reads its rows in order instead of sorting them all.
-- It costs one index entry per delivery made for a subscription, as the endpoint's does.
create index webhook_deliveries_subscription_log on service.webhook_deliveries (subscription_id, created_at desc, id desc)
  where subscription_id is not null;

-- Idempotency-Key on POST /api/v1/hooks: what a key's first request with that key answered,
-- for 24 hours. The answer is kept without the signing secret (the key's own, encrypted in
-- service.webhook_key_secrets): a replayed answer gets it again from there. Only a request
-- that succeeded is kept; one refused can be retried with the same key. At most 1000 a key
-- (the oldest go first), so a key's store is bounded whatever it sends.
create table service.api_idempotency (
  key_id uuid not null references service.api_keys (id) on delete cascade,
  idempotency_key text not null,
  request_hash text not null,          -- sha256 of the request's body, its fields in a fixed order
  status integer not null,
  response jsonb not null,             -- the answer's body without its secret
  created_at timestamptz not null default now(),
  primary key (key_id, idempotency_key)
);
create index api_idempotency_created on service.api_idempotency (created_at);
create index api_idempotency_key_created on service.api_idempotency (key_id, created_at desc);
