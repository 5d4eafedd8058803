-- The time zone pg_cron reads its jobs' schedules in (pg_cron 1.6+; no row
-- value before, when it is GMT).
SELECT current_setting('cron.timezone', true)
