-- The record changes in commit order, for integrators who follow them (GET /api/v1/stream:
-- docs/integrators.md). Capture writes a record's change as it writes its view, in the batch's
-- transaction, numbered by where it is in the WAL: the commit LSN of the batch that applied it
-- and, within the batch, the order its transactions committed (`ord`). Capture applies its
-- batches in commit order, so (commit_lsn, ord) runs in commit order. One row per record, its
-- latest change: a record that changed several times between two reads comes once, with its
-- latest state, at its latest place; a deleted record keeps its row (op 'delete'), as its
-- tombstone does. Starting points where changes were not written one by one (a first start, a
-- lost slot's rebuild, a fresh snapshot, views rewritten by rebuild-views) begin an epoch at the
-- checkpoint then: a follower whose place is not past it copies again.
create table service.record_changes (
  resource text not null,
  id uuid not null,
  company_id uuid not null,
  op text not null check (op in ('upsert', 'delete')),
  commit_lsn pg_lsn not null,
  ord integer not null,
  committed_at timestamptz not null,
  primary key (resource, id)
);

-- A company's changes after a place, in order.
create index record_changes_stream on service.record_changes (company_id, commit_lsn, ord);

create table service.stream_epochs (
  -- Changes up to this place (the checkpoint then) were not all written one by one.
  checkpoint_lsn pg_lsn not null,
  at timestamptz not null default now(),
  reason text not null
);
