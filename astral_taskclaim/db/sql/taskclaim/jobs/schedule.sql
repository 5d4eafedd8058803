-- Schedules taskclaim-ttl where pg_cron runs in this very database.
SELECT cron.schedule('taskclaim-ttl', '15 * * * *', %(command)s);
