-- Schedules (or reschedules, by name) a job where pg_cron runs in this very
-- database.
SELECT cron.schedule(%(name)s, %(schedule)s, %(command)s);
