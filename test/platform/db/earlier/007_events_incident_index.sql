-- Finding an incident's events when it becomes a privacy case (src/outbox/privacy.ts):
-- partial, so only incidents' events pay for it.
create index events_incident on service.events (record_id) where resource = 'incidents';
