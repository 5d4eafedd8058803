-- Removes this user's jobs of this base that no longer serve a database:
-- those of a dropped database, and one for the app's database under another
-- name than the one about to be scheduled (the shared base name of an
-- earlier release), so the database is not cleaned twice.
SELECT cron.unschedule(j.jobid)
FROM cron.job AS j
WHERE j.username = current_user
  AND (j.jobname = %(base)s OR starts_with(j.jobname, %(base)s || ':'))
  AND (
    NOT EXISTS (SELECT FROM pg_database AS d WHERE d.datname = j.database)
    OR (j.database = %(database)s AND j.jobname <> %(name)s)
  );
