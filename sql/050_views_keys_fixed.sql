-- migrate: fence 0.3.0
-- A view's resource and id name its record: the events that point at it (sql/031) and the
-- mirror row it stands for (sql/032) find it by them, and the triggers that keep both whole when
-- a view changes match its old and new row by them. An UPDATE that changed them would slip past
-- both (events reading a null payload, a mirror row lost): it is refused. The service never
-- changes them; a view is deleted and another inserted. Only an UPDATE naming those columns
-- runs this check (capture's writes name others).
create function service.views_keys_fixed() returns trigger language plpgsql as $$
begin
  raise exception 'service.views: a view''s resource and id never change (delete the view and insert another)'
    using errcode = 'object_not_in_prerequisite_state';
end $$;

create trigger views_keys_fixed before update of resource, id on service.views
  for each row when (old.resource is distinct from new.resource or old.id is distinct from new.id)
  execute function service.views_keys_fixed();
