-- The Docker demo's roles in the app's database server, made once on an empty data volume by
-- the postgres image's entrypoint (as the superuser, in the database POSTGRES_DB). Passwords
-- come from the app-db service's environment: demo values in docker-compose.yml.
\getenv app_password SAFETY_APP_PASSWORD
\getenv records_password SAFETY_RECORDS_PASSWORD

-- The app: owns the app's tables (02-app.sql) and writes them (the seed plays it).
create role safety_app login password :'app_password';
grant create on database :"DBNAME" to safety_app;

-- The service's login role here: it may replicate; 03-setup.sql gives it read access to the
-- app columns it follows, nothing more (its own schema is on the service-db server).
create role safety_records login replication password :'records_password';
