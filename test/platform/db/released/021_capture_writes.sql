-- Issue 18.3: fewer index updates per change capture writes. The name filter reads the
-- trigram index on the folded name (003: views_name_folded_trgm); this one, on the raw
-- name, serves no query, and every worker or job site view written paid a GIN update for it.
drop index if exists service.views_name_trgm;
