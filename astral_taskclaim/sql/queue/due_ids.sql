-- The ids receive.sql would lease next (without locking them), so that a
-- receive that failed on some row can lease them one by one and find it.
SELECT id
FROM taskclaim.message
WHERE queue = %(queue)s AND visible_at <= statement_timestamp()
  AND id <> ALL (%(skip)s::bigint[])
ORDER BY priority DESC, visible_at, id
LIMIT %(limit)s
