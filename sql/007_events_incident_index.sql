-- migrate: steps
-- migrate: equivalent-to 25c475021e73599998cfe0a4d9ee32d834fbbbf0c8f8f3d757aa858ae0da5862
-- migrate: accepts 247d9fd7ef45f0723f7e255027e109c9dc3314dc9ab655e0969067dceb88e37d
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): built concurrently.
-- Finding an incident's events when it becomes a privacy case (src/pipeline/outbox/privacy.ts):
-- partial, so only incidents' events pay for it.
create index concurrently if not exists events_incident on service.events (record_id) where resource = 'incidents';
