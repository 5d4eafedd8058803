-- pg_cron's database, or NULL where pg_cron is not loaded. pg_cron lets only
-- superusers and members of pg_read_all_settings read cron.database_name
-- (even with missing_ok), so a least-privilege service or migrating role
-- asks this function, which reads it as its owner: the role that ran this
-- migration (TASKCLAIM_ADMIN_ROLE when set), who needs one of those.
CREATE FUNCTION taskclaim.cron_database() RETURNS text
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog
AS $$ SELECT current_setting('cron.database_name', true) $$;

COMMENT ON FUNCTION taskclaim.cron_database()
IS 'The database pg_cron runs jobs from (NULL: pg_cron not loaded), for roles that cannot read cron.database_name.';
-- The owner may run it; the service role is granted it (taskclaim/cron_grants.sql).
REVOKE ALL ON FUNCTION taskclaim.cron_database() FROM PUBLIC;
