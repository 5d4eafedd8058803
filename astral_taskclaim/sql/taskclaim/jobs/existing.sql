-- The current user's taskclaim-ttl job in pg_cron's database, if any: the
-- database it runs in, and whether that database still exists.
SELECT j.database, EXISTS (SELECT FROM pg_database AS d WHERE d.datname = j.database) AS live
FROM cron.job AS j
WHERE j.jobname = 'taskclaim-ttl' AND j.username = current_user;
