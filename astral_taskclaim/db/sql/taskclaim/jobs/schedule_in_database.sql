-- Schedules (or reschedules, by name) the app database's job from pg_cron's
-- database, under the name `<base>:<database>`: pg_cron names jobs per user,
-- so each app database on the server gets a job of its own.
SELECT cron.schedule_in_database(%(name)s, %(schedule)s, %(command)s, %(database)s);
