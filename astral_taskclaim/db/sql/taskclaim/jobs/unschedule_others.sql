-- Removes this user's jobs whose name starts with the prefix and that serve
-- the app's database (or a dropped one), but for those of the kept bases
-- (under either name): the jobs of schedules no longer declared.
SELECT cron.unschedule(j.jobid)
FROM cron.job AS j
WHERE j.username = current_user
  AND starts_with(j.jobname, %(prefix)s)
  AND (
    j.database = %(database)s
    OR NOT EXISTS (SELECT FROM pg_database AS d WHERE d.datname = j.database)
  )
  AND NOT EXISTS (
    SELECT FROM unnest(%(keep)s::text[]) AS k (base)
    WHERE j.jobname IN (k.base, k.base || ':' || %(database)s)
  );
