-- Raises the message parameter as a NOTICE, so the migrating client and the
-- server log both show why the job was skipped.
SELECT set_config('taskclaim.notice', %(message)s, true);
DO $$ BEGIN RAISE NOTICE '%%', current_setting('taskclaim.notice'); END $$;
