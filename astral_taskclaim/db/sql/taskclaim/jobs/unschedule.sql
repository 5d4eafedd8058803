-- Removes the job that cleans the app's database, under either name.
SELECT cron.unschedule(jobid) FROM cron.job
WHERE database = %(database)s
  AND (jobname = 'taskclaim-ttl' OR jobname = 'taskclaim-ttl:' || %(database)s);
