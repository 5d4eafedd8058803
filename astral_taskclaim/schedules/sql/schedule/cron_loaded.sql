-- Whether pg_cron is loaded on the server (it names its database).
SELECT current_setting('cron.database_name', true) IS NOT NULL
