-- The service's login role on its own database server (service-db), made once on an empty
-- data volume by the postgres image's entrypoint (as the superuser, in the database
-- POSTGRES_DB). No REPLICATION here: nothing follows this database. The password comes from
-- the service-db service's environment: a demo value in docker-compose.yml.
\getenv records_password SAFETY_RECORDS_PASSWORD

create role safety_records login password :'records_password';
