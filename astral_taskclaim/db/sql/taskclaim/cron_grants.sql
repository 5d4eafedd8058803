-- The service role may ask where pg_cron runs (the worker and the checks do).
GRANT EXECUTE ON FUNCTION taskclaim.cron_database() TO {service_role};
