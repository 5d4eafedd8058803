-- Enqueues one run of a Django Task on the PostgreSQL queue in one statement:
-- claims its key (when it coalesces: taskclaim/claim.sql with the run's id as
-- token, timed from the statement as every claim write is), queues its
-- message with priority and due time (the queue's queue/send_due.sql), and
-- records its result row, all committing together. Returns the run's enqueue
-- time; or, when an unexpired claim holds the key, no enqueue time and the
-- holder's token (its result id).
WITH claimed AS (
  -- include: taskclaim/claim.sql
  --   replacing: gen_random_uuid()
  --   with: %(token)s::uuid
  --   replacing: WHERE NOT EXISTS (
  --   with: WHERE %(key)s::text IS NOT NULL AND NOT EXISTS (
  --   replacing: RETURNING token::text
  --   with: RETURNING c.token
), run AS (
  SELECT token FROM claimed
  UNION ALL
  SELECT %(token)s::uuid WHERE %(key)s::text IS NULL
), sent AS (
  -- include: queue/send_due.sql
  --   replacing: %(priority)s::smallint
  --   with: %(priority)s::smallint FROM run
), recorded AS (
  INSERT INTO taskclaim.task_result
    (id, task_path, backend, queue_name, queue, priority, run_after, key, args, kwargs)
  SELECT
    run.token, %(task_path)s::text, %(backend)s::text, %(task_queue_name)s::text,
    %(queue)s::text, %(priority)s::smallint, %(run_after)s::timestamptz, %(key)s::text,
    %(args)s::jsonb, %(kwargs)s::jsonb
  FROM run
  RETURNING enqueued_at
)
SELECT
  (SELECT enqueued_at FROM recorded) AS enqueued_at,
  (SELECT held.token::text FROM taskclaim.claim AS held
   WHERE NOT EXISTS (SELECT FROM run)
     AND held.key = %(key)s::text AND held.expires_at >= statement_timestamp()) AS holder
