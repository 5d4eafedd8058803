-- Whether an active job of this base (visible to this user) serves the app's
-- database, under either name; with a command, only one running that
-- command on the job's schedule (not one left by an older declaration).
SELECT EXISTS (
  SELECT FROM cron.job
  WHERE database = %(database)s AND active
    AND (jobname = %(base)s OR jobname = %(base)s || ':' || %(database)s)
    AND (%(command)s::text IS NULL OR (command = %(command)s AND schedule = %(schedule)s))
);
