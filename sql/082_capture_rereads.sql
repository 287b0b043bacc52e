-- App rows capture has asked to read again and not yet applied (docs/design.md, "Quarantine"):
-- the row a retried record needs whole (a value of it the decoder rejected), or an incident's
-- row whose person's details PostgreSQL sent as unchanged when its privacy case ended. Written
-- with the batch that asks, deleted with the batch that applies the row read, so a crash or a
-- failed read in between leaves the ask here and the next run reads the row.
create table service.capture_rereads (
  tbl text not null,
  key text not null,
  primary key (tbl, key)
);
