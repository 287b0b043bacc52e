-- Retries capture has queued and not yet taken (docs/design.md, "Quarantine"): an operator's
-- `retry --all`, or the records a table blocked once its re-read is over, go on 500 records per
-- request. Stored with each batch that changes the queue, in its transaction, so a restart goes
-- on where the last stored batch left it instead of leaving the rest held until someone retries
-- again. One row: capture has one leader.
create table service.capture_retries (
  id boolean primary key default true check (id),
  -- [{kind: "all", upTo, after} | {kind: "blocked", table, after}], oldest first; ids of
  -- service.capture_quarantine (`after`: the last one taken).
  work jsonb not null
);
