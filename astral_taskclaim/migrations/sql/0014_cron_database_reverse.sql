-- Undoes 0014_cron_database.sql.
DROP FUNCTION taskclaim.cron_database();
