-- Removes the task-result cleanup job of the app's database.
SELECT cron.unschedule(jobid) FROM cron.job
WHERE jobname = %(name)s AND database = %(database)s;
