-- How this role learns where pg_cron runs: 'setting' when it may read
-- cron.database_name (a superuser or of pg_read_all_settings), else
-- 'function' once migration 0014 made taskclaim.cron_database(), else NULL
-- (it cannot tell: migration 0003 of a first migrate by such a role).
SELECT CASE
  WHEN (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
    OR pg_has_role('pg_read_all_settings', 'USAGE') THEN 'setting'
  WHEN EXISTS (
    SELECT FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
    WHERE n.nspname = 'taskclaim' AND p.proname = 'cron_database'
  ) THEN 'function'
END;
