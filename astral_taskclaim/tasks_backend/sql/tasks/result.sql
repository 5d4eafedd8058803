-- One run's stored result, every column, for aget_result() (the columns in
-- the order of results.RESULT_COLUMNS).
SELECT
  id, task_path, backend, queue_name, queue, priority, run_after, key, status,
  args, kwargs, return_value, errors, worker_ids,
  enqueued_at, started_at, last_attempted_at, finished_at
FROM taskclaim.task_result
WHERE id = %(id)s::uuid
