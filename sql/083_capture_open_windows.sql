-- The re-read windows open at capture's checkpoint (docs/design.md, "Quarantine"): each chunk
-- between its low watermark and its high one, with the keys the stream changed in it so far,
-- written with the batch that moves the checkpoint. A run that streams again from that
-- checkpoint (after a crash of this database took the batch that applied a high watermark)
-- takes them up, so the chunk's rows are applied where they were read, not read again later.
-- Used only when stored with the very checkpoint the run starts from ({"at": lsn, ...}).
alter table service.capture_state add column open_windows jsonb;
