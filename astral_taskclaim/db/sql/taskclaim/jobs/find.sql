-- Whether an active job of this base (visible to this user) serves the app's
-- database, under either name.
SELECT EXISTS (
  SELECT FROM cron.job
  WHERE database = %(database)s AND active
    AND (jobname = %(base)s OR jobname = %(base)s || ':' || %(database)s)
);
