-- migrate: steps
-- migrate: equivalent-to fa595dd68e55c717fbcc81364a9e7fbc5b852db2388a492e0b80bf9a71cdf226
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): built and dropped
-- concurrently.
-- Finding a record's events when it is deleted (their payloads keep only its identifiers:
-- src/pipeline/outbox/deleted.ts), and an incident's when it becomes a privacy case
-- (privacy.ts): every event's now, so the partial index of incidents' goes.
create index concurrently if not exists events_record on service.events (record_id);
drop index concurrently if exists service.events_incident;
