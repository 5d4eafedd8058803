-- Removes the job of this base that serves the app's database, under either
-- name.
SELECT cron.unschedule(jobid) FROM cron.job
WHERE database = %(database)s
  AND (jobname = %(base)s OR jobname = %(base)s || ':' || %(database)s);
