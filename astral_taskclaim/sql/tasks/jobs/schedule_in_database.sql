-- Schedules the task-result cleanup from pg_cron's database for the app's.
SELECT cron.schedule_in_database(%(name)s, %(schedule)s, %(command)s, %(database)s);
