-- The latest runs that gave up in the last day, claimed tasks (taskclaim.run)
-- and Django Tasks (taskclaim.task_result) together, newest first, for
-- taskclaim_status: kind, task, key, run id, attempts, seconds since it
-- finished, and its last error's exception class and message. A range of
-- each table's finished_at index; values of odd rows come out as NULL.
SELECT * FROM (
  (SELECT 'claimed' AS kind, r.task, r.key, r.id::text AS id, r.attempts,
          extract(epoch FROM statement_timestamp() - r.finished_at)::float8 AS age_seconds,
          r.errors -> -1 ->> 'exception_class_path' AS error_class,
          r.errors -> -1 ->> 'message' AS error_message
   FROM taskclaim.run AS r
   WHERE r.finished_at BETWEEN statement_timestamp() - interval '1 day' AND statement_timestamp()
     AND r.status = 'FAILED'
   ORDER BY r.finished_at DESC
   LIMIT %(limit)s)
  UNION ALL
  (SELECT 'django', t.task_path, t.key, t.id::text,
          CASE WHEN jsonb_typeof(t.worker_ids) = 'array' THEN jsonb_array_length(t.worker_ids) END,
          extract(epoch FROM statement_timestamp() - t.finished_at)::float8,
          t.errors -> -1 ->> 'exception_class_path',
          NULL
   FROM taskclaim.task_result AS t
   WHERE t.finished_at BETWEEN statement_timestamp() - interval '1 day' AND statement_timestamp()
     AND t.status = 'FAILED'
   ORDER BY t.finished_at DESC
   LIMIT %(limit)s)
) AS failures
ORDER BY age_seconds
LIMIT %(limit)s
