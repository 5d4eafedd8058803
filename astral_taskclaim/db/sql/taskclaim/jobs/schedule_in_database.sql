-- Schedules the app database's job from pg_cron's database, under the name
-- `taskclaim-ttl:<database>`: pg_cron names jobs per user, so each app
-- database on the server gets a job of its own.
SELECT cron.schedule_in_database(%(name)s, '15 * * * *', %(command)s, %(database)s);
