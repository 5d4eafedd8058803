-- Makes the given delayed messages visible now and wakes each queue's
-- waiting consumers (the notifications go out on commit). Leased messages
-- are left alone: a consumer is running them.
WITH due AS (
  UPDATE taskclaim.message
  SET visible_at = statement_timestamp()
  WHERE id = ANY(%(ids)s::bigint[])
    AND lease IS NULL
    AND visible_at > statement_timestamp()
  RETURNING queue
)
SELECT per_queue.queue, per_queue.messages, pg_notify('taskclaim.' || per_queue.queue, '')
FROM (SELECT queue, count(*) AS messages FROM due GROUP BY queue) AS per_queue;
