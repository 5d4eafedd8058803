-- Records a failed attempt: READY again when a retry is due, FAILED when the
-- run gives up (final). A run already finished is left alone.
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
RETURNING finished_at
