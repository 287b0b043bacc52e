-- migrate: steps
-- migrate: equivalent-to 25c475021e73599998cfe0a4d9ee32d834fbbbf0c8f8f3d757aa858ae0da5862
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): built concurrently.
-- Finding an incident's events when it becomes a privacy case (src/pipeline/outbox/privacy.ts):
-- partial, so only incidents' events pay for it.
create index concurrently if not exists events_incident on service.events (record_id) where resource = 'incidents';
