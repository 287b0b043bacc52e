-- migrate: fence 0.2.0
-- migrate: allows ban-drop-not-null (blocks reads and writes of service.events for under 10 ms, a catalog change): an older release reads a null payload wrong, hence the fence
-- An event's payload is its record as the API returned it at the event's commit: most often the
-- body its record's view holds now (docs/design.md, "An event points at its record's view").
-- Such an event keeps no copy: payload null means "the body of the view (resource, record_id)".
-- When a view's body changes or the view goes, these triggers first copy the old body into the
-- events still pointing at it, in the same transaction, so a reader (one statement, one
-- snapshot) always finds the body of the event's commit: in the event, or in the view.
-- Events already stored keep their copies.
alter table service.events alter column payload drop not null;

create function service.events_keep_changed_bodies() returns trigger language plpgsql as $$
begin
  update service.events e set payload = o.body
    from old_views o join new_views n on n.resource = o.resource and n.id = o.id
   where n.body is distinct from o.body
     and e.record_id = o.id and e.resource = o.resource and e.payload is null;
  return null;
end $$;

create function service.events_keep_deleted_bodies() returns trigger language plpgsql as $$
begin
  update service.events e set payload = o.body
    from old_views o
   where e.record_id = o.id and e.resource = o.resource and e.payload is null;
  return null;
end $$;

create function service.events_keep_all_bodies() returns trigger language plpgsql as $$
begin
  update service.events e set payload = v.body
    from service.views v
   where e.payload is null and v.resource = e.resource and v.id = e.record_id;
  return null;
end $$;

-- Statement-level, with transition tables: one join per statement, however many views it wrote
-- (capture writes a batch's views in one statement).
create trigger views_keep_event_bodies_on_update after update on service.views
  referencing old table as old_views new table as new_views
  for each statement execute function service.events_keep_changed_bodies();
create trigger views_keep_event_bodies_on_delete after delete on service.views
  referencing old table as old_views
  for each statement execute function service.events_keep_deleted_bodies();
create trigger views_keep_event_bodies_on_truncate before truncate on service.views
  for each statement execute function service.events_keep_all_bodies();
