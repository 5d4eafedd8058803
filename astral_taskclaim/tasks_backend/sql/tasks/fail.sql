-- Records a failed attempt: READY again when a retry is due, FAILED when the
-- run gives up (final). A run already finished is left alone.
-- With `relaxed` (autocommit: the statement is its own transaction) the
-- commit does not wait for the WAL flush: the settlement of the run's
-- message, committed after it, flushes it (see docs/django-tasks.md).
UPDATE taskclaim.task_result
SET status = CASE WHEN %(final)s::boolean THEN 'FAILED' ELSE 'READY' END,
    finished_at = CASE WHEN %(final)s::boolean THEN statement_timestamp() END,
    errors = errors || jsonb_build_array(jsonb_build_object(
      'exception_class_path', %(exception_class_path)s::text,
      'traceback', %(traceback)s::text,
      'attempt', jsonb_array_length(worker_ids),
      'at', statement_timestamp(),
      'final', %(final)s::boolean
    ))
WHERE id = %(id)s::uuid AND status IN ('READY', 'RUNNING')
  -- Not with a synchronous standby: a settlement retried on the standby
  -- promoted after a crash would find the message but not these states.
  AND (SELECT NOT %(relaxed)s::boolean OR current_setting('synchronous_standby_names') <> ''
       OR set_config('synchronous_commit', 'off', true) = 'off')
RETURNING finished_at
