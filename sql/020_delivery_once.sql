-- migrate: allows ban-drop-table (blocks reads of service.webhook_fanout for under 10 ms): its one row moves to twelve partitions, and a view takes its name
-- migrate: allows renaming-table (blocks reads and writes of service.webhook_attempts for under 10 ms): a view of the same name reads the earlier attempts and the latest
-- migrate: steps
-- migrate: equivalent-to 2a63899ddf582723a6826e3400cfe1bfa710da30cad9c0879d3be1d33e871e0c
-- migrate: fence 0.2.0
-- A delivery pays for durability once. The engine sends a first attempt straight
-- from fan-out and writes the delivery row afterwards, already in its outcome (many per
-- statement, with the fan-out cursor); only a delivery that failed, or that waits too long
-- in memory, becomes a scheduled row with a lease. Existing rows keep their ids, state and
-- schedule. An engine of an older release would write deliveries the old way: fenced.
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): each delivery's latest
-- attempt moves into its row in batches that commit, after the rest (the released text moved
-- them all under the lock of the ALTER, about 45 s per million deliveries).

-- A delivery's id is a function of (event, destination), so a crash between a send and its
-- record sends again under the same id. UUID version 8 (RFC 9562, custom): the first 48 bits
-- are the event id's (a UUIDv7's millisecond time, so new rows land at the right edge of the
-- primary key), the rest SHA-256 of the text of the event id, 'e' or 's', and the
-- destination's id. src/webhooks/engine/ids.ts computes the same in the engine.
create function service.webhook_delivery_id(p_event uuid, p_endpoint uuid, p_subscription uuid) returns uuid
language sql immutable parallel safe
as $$
  select encode(set_byte(set_byte(b, 6, (get_byte(b, 6) & 15) | 128), 8, (get_byte(b, 8) & 63) | 128), 'hex')::uuid
  from (select substring(uuid_send(p_event) from 1 for 6) || substring(sha256(convert_to(p_event::text ||
    case when p_endpoint is not null then 'e' || p_endpoint::text else 's' || p_subscription::text end, 'UTF8'))
    from 1 for 10) as b) x
$$;

-- Fan-out is shared by partitions of the outbox: an event belongs to one of 12 (by its id),
-- each with its own cursor, owned by one engine process at a time under a lease. Every
-- process fans out and sends the events of the partitions it owns; they divide the
-- partitions evenly among the live processes (service.webhook_engines).
create function service.webhook_part(p_event uuid) returns integer
language sql immutable parallel safe
as $$ select get_byte(uuid_send(p_event), 15) % 12 $$;

-- Every delivery of the partition's events up to (commit_lsn, seq) is written. Rows may
-- exist beyond it, up to recorded_lsn/seq (written out of order before a crash): whoever
-- reads those events again checks for them, and sends only what has no row.
create table service.webhook_fanout_parts (
  part smallint primary key check (part between 0 and 11),
  commit_lsn pg_lsn not null,
  seq integer not null,
  recorded_lsn pg_lsn not null default '0/0',
  recorded_seq integer not null default 0,
  owner uuid,                          -- the engine instance fanning it out
  lease_until timestamptz              -- the database's clock: a lease of liveness, not a schedule
);
insert into service.webhook_fanout_parts (part, commit_lsn, seq)
select g, f.commit_lsn, f.seq from service.webhook_fanout f, generate_series(0, 11) g;
drop table service.webhook_fanout;
-- How far the whole outbox is fanned out: the slowest partition (status, metrics, retention).
create view service.webhook_fanout as
  select commit_lsn, seq from service.webhook_fanout_parts order by commit_lsn, seq limit 1;

-- Engine processes alive now, so that each takes its share of the partitions.
create table service.webhook_engines (
  id uuid primary key,
  alive_until timestamptz not null
);

-- No foreign keys on deliveries: a check per inserted row cost more than the row itself.
-- The engine locks the destinations of a batch (for key share) and writes rows only for
-- those that exist; deleting a destination deletes its deliveries (triggers below); outbox
-- events go only by retention, which keeps those a delivery still points at.
alter table service.webhook_deliveries
  drop constraint webhook_deliveries_event_id_fkey,
  drop constraint webhook_deliveries_endpoint_id_fkey,
  drop constraint webhook_deliveries_subscription_id_fkey,
  -- The latest attempt lives in the row (last_status, last_error, last_attempt_at and these);
  -- earlier ones in service.webhook_earlier_attempts.
  add column last_duration_ms integer,
  add column last_error_kind text,
  add column last_snippet text;

create function service.webhook_destination_deleted() returns trigger
language plpgsql as $$
begin
  if tg_table_name = 'webhook_endpoints' then
    delete from service.webhook_deliveries d using gone g where d.endpoint_id = g.id;
  else
    delete from service.webhook_deliveries d using gone g where d.subscription_id = g.id;
  end if;
  return null;
end $$;
create trigger webhook_endpoints_deleted_deliveries after delete on service.webhook_endpoints
  referencing old table as gone for each statement execute function service.webhook_destination_deleted();
create trigger webhook_subscriptions_deleted_deliveries after delete on service.webhook_subscriptions
  referencing old table as gone for each statement execute function service.webhook_destination_deleted();

-- One row per attempt at most: a delivery's latest attempt is in its own row; when the next
-- is recorded, the one before moves here.
alter table service.webhook_attempts rename to webhook_earlier_attempts;

-- Every attempt, as the delivery log reads it: while the batches below run, a delivery's
-- latest attempt is in one of the two, whichever its batch left it in.
create view service.webhook_attempts as
  select a.delivery_id, a.number, a.started_at, a.duration_ms, a.status, a.error, a.error_kind, a.response_snippet
  from service.webhook_earlier_attempts a
  union all
  select d.id, d.attempts, d.last_attempt_at, d.last_duration_ms, d.last_status, d.last_error, d.last_error_kind, d.last_snippet
  from service.webhook_deliveries d where d.last_duration_ms is not null;

-- 2,000 deliveries a batch in id order, each batch committed; a batch that waits for a row
-- another process holds gives way (lock_timeout, set by the runner) and is tried again. The
-- statements are EXECUTEd: each is planned for its batch's ids (a plan cached for any ids reads
-- the whole table; a range of one column is estimated from its histogram).
do $$
declare
  last_id uuid := '00000000-0000-0000-0000-000000000000';
  next_id uuid;
  tries int := 0;
begin
  loop
    execute 'select b.id
               from (select d.id from service.webhook_deliveries d where d.id > $1 order by d.id limit 2000) b
              order by b.id desc limit 1'
      into next_id using last_id;
    exit when next_id is null;
    begin
      execute 'update service.webhook_deliveries d set last_attempt_at = a.started_at, last_status = a.status,
                 last_error = a.error, last_duration_ms = a.duration_ms, last_error_kind = a.error_kind,
                 last_snippet = a.response_snippet
               from service.webhook_earlier_attempts a
               where a.delivery_id = d.id and a.number = d.attempts and d.id > $1 and d.id <= $2'
        using last_id, next_id;
      execute 'delete from service.webhook_earlier_attempts a using service.webhook_deliveries d
               where a.delivery_id = d.id and a.number = d.attempts and d.id > $1 and d.id <= $2'
        using last_id, next_id;
    exception when lock_not_available or deadlock_detected then
      tries := tries + 1;
      if tries > 600 then raise; end if;
      perform pg_sleep(0.05);
      continue;
    end;
    tries := 0;
    last_id := next_id;
    commit;
  end loop;
end $$;
