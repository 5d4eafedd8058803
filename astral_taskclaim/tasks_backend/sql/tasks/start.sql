-- Starts an attempt of a run that has not finished: RUNNING, one more
-- attempt by this worker. No row for a finished (or cancelled, or deleted)
-- run, which is then not run again, nor for a message whose task path and
-- arguments are not the run's (a forged message naming a real run's id).
-- With `relaxed` (autocommit: the statement is its own transaction) the
-- commit does not wait for the WAL flush: the settlement of the run's
-- message, committed after it, flushes it (see docs/django-tasks.md).
UPDATE taskclaim.task_result
SET status = 'RUNNING',
    worker_ids = worker_ids || jsonb_build_array(%(worker_id)s::text),
    started_at = coalesce(started_at, statement_timestamp()),
    last_attempted_at = statement_timestamp()
WHERE id = %(id)s::uuid AND status IN ('READY', 'RUNNING')
  AND task_path = %(task_path)s::text
  AND args = %(args)s::jsonb AND kwargs = %(kwargs)s::jsonb
  -- Not with a synchronous standby: a settlement retried on the standby
  -- promoted after a crash would find the message but not these states.
  AND (SELECT NOT %(relaxed)s::boolean OR current_setting('synchronous_standby_names') <> ''
       OR set_config('synchronous_commit', 'off', true) = 'off')
RETURNING status, enqueued_at, started_at, last_attempted_at, worker_ids
