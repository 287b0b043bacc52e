-- Server-kept positions in the stream of record changes (GET /api/v1/consumers/<name>/stream:
-- docs/integrators.md#following-the-stream), and where retention has cut each company's changes.
--
-- A consumer belongs to one key (at most 20 per key, a key sees only its own). `position` is the
-- offset the client acknowledged (null: from the oldest change kept), `served` the furthest offset
-- the service has answered it (an ack beyond that was never served: refused). Offsets are the
-- service's opaque, signed strings (src/read/stream-offset.ts).
create table service.stream_consumers (
  key_id uuid not null references service.api_keys (id) on delete cascade,
  name text not null,
  -- The resources it follows; null: every resource the key may read.
  resources text[],
  position text,
  served text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (key_id, name)
);

-- The furthest change of each company that retention (30 days) removed from service.record_changes:
-- an offset before it may have missed a change, and is answered 409 with mustRefetch.
create table service.stream_pruned (
  company_id uuid primary key,
  commit_lsn pg_lsn not null,
  ord integer not null,
  resource text not null,
  id uuid not null,
  pruned_at timestamptz not null default now()
);
