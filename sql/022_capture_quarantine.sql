-- Poison changes are quarantined, not fatal (docs/design.md, "Quarantine"). A record whose
-- view capture cannot shape (a value it cannot read, a NaN where it reads a number, a table
-- whose columns no longer fit what it reads) keeps its last good view; its events are held.
-- One row per held record, written in the batch transaction that moves the checkpoint past
-- the change, so a crash keeps the row and the checkpoint together.
create table service.capture_quarantine (
  id bigint generated always as identity primary key,
  -- commit end LSN of the transaction whose change was first held
  lsn pg_lsn not null,
  -- the record's app table and key (its id)
  tbl text not null,
  key text not null,
  company_id uuid,
  error text not null,
  first_seen timestamptz not null default now(),
  last_seen timestamptz not null default now(),
  -- times capture tried to shape it and failed (the first one, later changes, retries)
  attempts integer not null default 1,
  -- the record's row (JSON text, published columns only) as of its last good view, null when
  -- it had none: the events it owes are those between this and the row it shapes from again
  before text,
  -- the app table whose contract break holds it, else null
  blocked_by text,
  -- the app row with a value capture could not decode (its mirror row lacks that value): the
  -- record shapes again only from a whole copy of that row (its next change, or re-read on retry)
  source_tbl text,
  source_key text,
  unique (tbl, key)
);
create index capture_quarantine_blocked on service.capture_quarantine (blocked_by) where blocked_by is not null;

-- App tables whose columns, as the change stream or the catalog describe them, no longer fit
-- what capture reads (a column it reads gone, renamed or retyped, the table out of the
-- publication): one row each while it lasts, problems naming app.table.column and what the
-- service expects.
create table service.capture_contract (
  tbl text primary key,
  problems text[] not null,
  since timestamptz not null default now(),
  lsn pg_lsn not null
);

-- App tables capture re-reads from the app after their contract holds again (their changes
-- while it was broken were held or never streamed), a chunk of keys at a time between two
-- watermarks in the WAL; after_key is where the next chunk starts ('' from the first key).
create table service.capture_resync (
  tbl text primary key,
  after_key text not null default '',
  rows bigint not null default 0,
  started_at timestamptz not null default now()
);
