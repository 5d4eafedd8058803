-- Claims in force and claims expired but not yet deleted (by pg_cron's
-- taskclaim-ttl job or `manage.py taskclaim_delete_expired`).
SELECT
  count(*) FILTER (WHERE expires_at > statement_timestamp()) AS active,
  count(*) FILTER (WHERE expires_at <= statement_timestamp()) AS expired
FROM taskclaim.claim
