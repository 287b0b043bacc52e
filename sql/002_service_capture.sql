-- The service's own state for change capture and projection.
-- Written only by the capture process, in the same transaction as its checkpoint.
create extension if not exists pg_trgm;


-- One row per replication slot: the commit end LSN of the last applied transaction.
create table service.capture_state (
  slot_name text primary key,
  checkpoint_lsn pg_lsn not null,
  last_commit_at timestamptz,          -- commit time of the last applied transaction
  applied_at timestamptz,              -- when we applied it (lag in seconds = applied_at - last_commit_at)
  bootstrapped_at timestamptz,         -- when the views were last built from a snapshot
  gap_at timestamptz,                  -- set when a lost slot forced a rebuild: events in the gap are unknown
  gap_reason text
);

-- Mirror of the published columns of every app row (NEVER columns are not published, so
-- they never reach this table). The prior state of a row for event rules and the source
-- for re-projecting parents come from here, never from the app tables on the hot path.
create table service.rows (
  tbl text not null,
  key text not null,                   -- the row's id; company_id:module for company_modules
  company_id uuid,
  parent_id uuid,                      -- audit/inspection/policy/subcontractor for children,
                                       -- equipment for inspections, job site for equipment
  data jsonb not null,
  primary key (tbl, key)
);
create index rows_parent on service.rows (tbl, parent_id) where parent_id is not null;

-- Tenancy as the service needs it on a request's path, kept from the mirror.
create table service.companies (
  id uuid primary key,
  name text not null,
  host text not null,
  tier text not null,
  api_enabled boolean not null,
  modules text[] not null default '{}',
  created_at timestamptz not null
);
create unique index companies_host on service.companies (lower(host));

create table service.users (
  id uuid primary key,
  company_id uuid not null,
  name text not null,
  email text not null,
  role text not null
);
create index users_email on service.users (lower(email));

-- API-shaped records: body is the exact JSON that GET /api/v1/<resource>/<id> returns under data.
create table service.views (
  resource text not null,
  id uuid not null,
  company_id uuid not null,
  created_at timestamptz not null,
  name text,                           -- workers and job sites: for the name filter
  status text,                         -- corrective actions: for the status filter
  body text not null,
  primary key (resource, id)
);
create index views_page on service.views (company_id, resource, created_at desc, id desc);
create index views_status_page on service.views (company_id, resource, status, created_at desc, id desc)
  where status is not null;
create index views_name_trgm on service.views using gin (name gin_trgm_ops) where name is not null;

-- The outbox: one row per event, ordered and deduplicated by (commit_lsn, seq).
create table service.events (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null,
  event text not null,
  resource text not null,
  record_id uuid not null,
  commit_lsn pg_lsn not null,
  seq integer not null,                -- index of the event within its transaction
  payload text not null,               -- the record as the API returned it at that commit
  created_at timestamptz not null,     -- the transaction's commit time
  unique (commit_lsn, seq)
);
create index events_page on service.events (company_id, created_at desc, id desc);

-- Who did what to keys, endpoints and subscriptions.
create table service.activity (
  id bigint generated always as identity primary key,
  company_id uuid not null,
  actor_id uuid,
  actor_email text,
  kind text not null,                  -- e.g. key.created, key.revoked, endpoint.created
  subject_id text,
  details jsonb not null default '{}',
  at timestamptz not null default now()
);
create index activity_page on service.activity (company_id, at desc, id desc);
