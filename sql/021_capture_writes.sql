-- migrate: steps
-- migrate: equivalent-to 945afa7befcba4bb7519fa5e0d0febe1e2e63be0846420caa0810066bd36de87
-- Fewer index updates per change capture writes. The name filter reads the trigram index on
-- the folded name (003: views_name_folded_trgm); this one, on the raw name, serves no query,
-- and every worker or job site view written paid a GIN update for it.
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): dropped concurrently.
drop index concurrently if exists service.views_name_trgm;
