-- Removes the taskclaim-ttl job that runs in the app's database.
SELECT cron.unschedule(jobid) FROM cron.job
WHERE jobname = 'taskclaim-ttl' AND database = %(database)s;
