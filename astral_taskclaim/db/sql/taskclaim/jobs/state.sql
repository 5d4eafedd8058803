-- Where pg_cron runs (NULL: not loaded), whether this database has its
-- extension, and whether this role may create it.
SELECT
  current_setting('cron.database_name', true) AS cron_database,
  current_database() AS database,
  EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') AS installed,
  (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser;
