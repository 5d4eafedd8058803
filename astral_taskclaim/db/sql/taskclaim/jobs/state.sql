-- Whether this database has pg_cron's extension, and whether this role may
-- create it (where pg_cron runs: db.cron.cron_database()).
SELECT
  current_database() AS database,
  EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') AS installed,
  (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser;
