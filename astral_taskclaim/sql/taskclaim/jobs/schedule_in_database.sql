-- Schedules taskclaim-ttl from pg_cron's database for the app's database.
SELECT cron.schedule_in_database('taskclaim-ttl', '15 * * * *', %(command)s, %(database)s);
