-- Safety Records Service: what a DBA runs once so the service runs as role safety_records with least
-- privilege. Run it as a superuser (on a managed server, the admin user that made the role),
-- e.g. psql -v ON_ERROR_STOP=1 -d <database> -f setup.sql
--
-- Two parts: the first in the app's database (DATABASE_URL), the second in the service's own
-- database (SERVICE_DATABASE_URL: its mirror, views, outbox, deliveries, keys). With one
-- database (SERVICE_DATABASE_URL unset), run both in the app's database.
-- Print one part alone with --part app or --part service.

-- Part 2, in the service's own database (or, with one database, the app's). There the role
-- needs LOGIN only, no REPLICATION; on a server of its own, make it there too:
--      create role safety_records with login password '...';
-- (Or make the role this database's owner: its migrations then make both below themselves.)

begin;

-- 4. The service's own schema, owned by the role: its migrations make everything inside.
create schema if not exists service authorization safety_records;

-- 5. Trigram indexes for the name filters (pg_trgm, a trusted extension every provider offers).
create extension if not exists pg_trgm;

commit;

-- Then start the service with DATABASE_URL=postgres://safety_records:<password>@<host>/<the app's database>
-- and SERVICE_DATABASE_URL=postgres://safety_records:<password>@<host>/<the service's database>
-- (DATABASE_URL alone with one database; PUBLICATION=safety_records_service unless that is the default).
-- It creates its replication slot itself.
