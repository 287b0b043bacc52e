-- migrate: steps
-- migrate: equivalent-to 5269119276cb16dd37ccc49d0751a69d270e33b14015dea0bf318b8b51911ea4
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): the name filter's
-- trigram index is built concurrently, after the rest commits.
-- API keys, admin tokens, the shared rate-limit state and the service's own settings.
-- Written by the admin operations (CLI and /admin/v1) and, for rate limits and usage, by
-- the API; read by the API on every request through service.api_authenticate().

-- Server-side secrets and settings, created on first use (e.g. the cursor signing key).
create table service.settings (
  name text primary key,
  value text not null,
  created_at timestamptz not null default now()
);

-- API keys. The key itself (mk_...) is shown once; only its SHA-256 fingerprint is kept.
-- A key is active while revoked_at is null and expires_at is null or in the future.
create table service.api_keys (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null,
  name text not null,
  prefix text not null,                -- the key's first characters, to recognise it in lists
  fingerprint bytea not null unique,   -- sha256(key)
  scopes text[] not null,              -- resources the key may read (the API's names)
  webhooks boolean not null default false,
  expires_at timestamptz,              -- null: never
  created_at timestamptz not null default now(),
  created_by uuid,
  created_by_email text,
  revoked_at timestamptz,
  revoked_by uuid,
  revoked_by_email text,
  -- Usage, flushed from each API process every few seconds (not written per request).
  last_used_at timestamptz,
  request_count bigint not null default 0
);
create index api_keys_company on service.api_keys (company_id, created_at desc, id desc);

-- Admin tokens for /admin/v1, issued by the CLI (`tokens create --as <admin e-mail>`).
-- The holder acts as that admin user; each request re-checks that the user is still an admin.
create table service.admin_tokens (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null,
  user_id uuid not null,
  user_email text not null,
  name text not null,
  prefix text not null,
  fingerprint bytea not null unique,
  expires_at timestamptz,
  created_at timestamptz not null default now(),
  created_by_email text,
  revoked_at timestamptz,
  last_used_at timestamptz
);
create index admin_tokens_company on service.admin_tokens (company_id, created_at desc);

-- Rate-limit state per key, shared by every API process. A key's window starts with its
-- first request after the previous window ended and lasts the window length; at most the
-- limit of requests is granted in it, in small leases that each process then spends from
-- memory (one write per lease, not per request). Unlogged: no WAL; a crash forgets at most
-- one window of counts.
create unlogged table service.rate_limits (
  key_id uuid primary key,
  window_start timestamptz not null,
  granted integer not null
);

-- Grants up to p_want requests for a key in its current window (starting a new window when
-- the last one is over), never more than p_limit in one window, atomically across
-- processes. Returns what was granted now, what the window still has after this grant, and
-- the milliseconds until the window ends.
create function service.rate_limit_lease(p_key uuid, p_limit integer, p_window_seconds integer, p_want integer,
  out granted integer, out remaining integer, out window_ms integer)
language plpgsql as $$
declare
  now_ts timestamptz := clock_timestamp();
  started timestamptz;
  used integer;
begin
  insert into service.rate_limits (key_id, window_start, granted) values (p_key, now_ts, 0)
    on conflict (key_id) do nothing;
  select r.window_start, r.granted into started, used from service.rate_limits r where r.key_id = p_key for update;
  if started + make_interval(secs => p_window_seconds) <= now_ts then
    started := now_ts;
    used := 0;
  end if;
  granted := greatest(least(p_want, p_limit - used), 0);
  used := used + granted;
  update service.rate_limits r set window_start = started, granted = used where r.key_id = p_key;
  remaining := greatest(p_limit - used, 0);
  window_ms := greatest(ceil(extract(epoch from (started + make_interval(secs => p_window_seconds) - now_ts)) * 1000), 0)::integer;
end $$;

-- The name filter on workers and job sites: a case-insensitive part of the name
-- in every alphabet, whatever the database's locale (ILIKE under the C locale folds only
-- ASCII), and fast on large tables through a trigram index on the folded name.
do $$
declare
  coll text := 'default';
begin
  if exists (select 1 from pg_collation where collname = 'pg_c_utf8')
     and (select pg_encoding_to_char(encoding) from pg_database where datname = current_database()) = 'UTF8' then
    coll := 'pg_c_utf8';         -- PostgreSQL 17+: Unicode case mapping, no ICU needed
  elsif exists (select 1 from pg_collation where collname = 'und-x-icu') then
    coll := 'und-x-icu';
  end if;
  execute format(
    'create function service.fold_name(t text) returns text language sql immutable parallel safe as %L',
    format('select lower(t collate %I)', coll));
end $$;

create index concurrently if not exists views_name_folded_trgm on service.views using gin (service.fold_name(name) gin_trgm_ops)
  where name is not null;

-- Webhook subscriptions made through the API belong to the webhooks migrations; revoking a
-- key must delete them (docs/api.md). Keys are revoked with
--   update service.api_keys set revoked_at = now(), revoked_by = ..., revoked_by_email = ...
-- so a trigger there (after update of revoked_at) deletes them in the same transaction as
-- the revocation (004_service_webhooks.sql: api_keys_revoked_webhooks).
