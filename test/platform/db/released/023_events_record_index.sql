-- Finding a record's events when it is deleted (their payloads keep only its identifiers:
-- src/pipeline/outbox/deleted.ts), and an incident's when it becomes a privacy case
-- (privacy.ts): every event's now, so the partial index of incidents' goes.
create index events_record on service.events (record_id);
drop index service.events_incident;
