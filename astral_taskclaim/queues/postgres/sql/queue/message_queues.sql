-- The distinct queue names in taskclaim.message, found by hopping along
-- message_queue_visible_at_idx (one index probe per queue) instead of
-- reading every row.
WITH RECURSIVE names (queue) AS (
  (SELECT queue FROM taskclaim.message ORDER BY queue LIMIT 1)
  UNION ALL
  SELECT (
    SELECT m.queue FROM taskclaim.message AS m
    WHERE m.queue > names.queue
    ORDER BY m.queue
    LIMIT 1
  )
  FROM names
  WHERE names.queue IS NOT NULL
)
SELECT queue FROM names WHERE queue IS NOT NULL ORDER BY queue;
