-- Whether an active job (visible to this user) cleans the app's database.
SELECT EXISTS (
  SELECT FROM cron.job
  WHERE database = %(database)s AND active
    AND (jobname = 'taskclaim-ttl' OR jobname = 'taskclaim-ttl:' || %(database)s)
);
