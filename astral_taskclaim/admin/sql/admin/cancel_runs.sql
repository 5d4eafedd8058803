-- Cancels the given Django Task runs that are still READY: marks them
-- FAILED with the given error appended (their workers ack the messages
-- unrun), and releases the key claim a coalescing run holds, so the next
-- enqueue() of its key makes a new run instead of returning the cancelled
-- one. A claim taken since by another run stays. Returns how many runs it
-- cancelled.
WITH cancelled AS (
  UPDATE taskclaim.task_result
  SET status = 'FAILED',
      finished_at = statement_timestamp(),
      errors = errors || %(error)s::jsonb
  WHERE id = ANY(%(ids)s::uuid[]) AND status = 'READY'
  RETURNING id, key
),
released AS (
  DELETE FROM taskclaim.claim AS c
  USING cancelled
  WHERE c.key = cancelled.key AND c.token = cancelled.id
  RETURNING c.key
)
SELECT (SELECT count(*) FROM cancelled) AS cancelled, (SELECT count(*) FROM released) AS released
