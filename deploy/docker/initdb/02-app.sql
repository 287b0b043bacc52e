-- The app's tables, made by the app's own role as the app would have made them: the demo's copy
-- of them (sql/demo/app.sql, mounted read-only at /srv/sql/demo by docker-compose.yml).
set role safety_app;
\i /srv/sql/demo/app.sql
reset role;
