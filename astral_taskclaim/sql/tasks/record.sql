-- Records a run whose message goes to a queue outside the database (sent
-- right after, by the caller). Returns its enqueue time.
INSERT INTO taskclaim.task_result
  (id, task_path, backend, queue_name, queue, priority, run_after, key, args, kwargs)
VALUES (
  %(token)s::uuid, %(task_path)s, %(backend)s, %(task_queue_name)s, %(queue)s,
  %(priority)s::smallint, %(run_after)s::timestamptz, %(key)s, %(args)s::jsonb, %(kwargs)s::jsonb
)
RETURNING enqueued_at
