-- Finishes a running run with its return value.
-- With `relaxed` (autocommit: the statement is its own transaction) the
-- commit does not wait for the WAL flush: the settlement of the run's
-- message, committed after it, flushes it (see docs/django-tasks.md).
UPDATE taskclaim.task_result
SET status = 'SUCCESSFUL', return_value = %(return_value)s::jsonb,
    finished_at = statement_timestamp()
WHERE id = %(id)s::uuid AND status = 'RUNNING'
  -- Not with a synchronous standby: a settlement retried on the standby
  -- promoted after a crash would find the message but not these states.
  AND (SELECT NOT %(relaxed)s::boolean OR current_setting('synchronous_standby_names') <> ''
       OR set_config('synchronous_commit', 'off', true) = 'off')
RETURNING finished_at
