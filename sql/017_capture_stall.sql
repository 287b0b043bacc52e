-- Issue 16.1: a capture whose replication stream goes quiet while WAL waits in its slot (a
-- connection that hangs, a walsender gone without a word) reconnects on its own. Whether that
-- helped is told here, in the database, so `status` and every process's metrics can say so
-- wherever they run: set when capture notices a stall (kept from the first one, with the
-- latest reason and how many reconnects it took so far), cleared once it applies again.
alter table service.capture_state
  add column stalled_at timestamptz,
  add column stall_reason text,
  add column stall_reconnects integer not null default 0;
