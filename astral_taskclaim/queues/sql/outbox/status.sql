-- Depth and oldest row of each named queue's outbox: the rows counted up to
-- a bound (past it the depth is given as "more than"), the oldest found by
-- one probe of outbox_queue_id_idx.
SELECT
  named.queue,
  (SELECT count(*) FROM (
     SELECT FROM taskclaim.outbox AS o WHERE o.queue = named.queue LIMIT %(bound)s
   ) AS counted)::integer,
  extract(epoch FROM statement_timestamp() - (
    SELECT o.enqueued_at FROM taskclaim.outbox AS o
    WHERE o.queue = named.queue ORDER BY o.id LIMIT 1
  ))::double precision
FROM unnest(%(queues)s::text[]) AS named (queue)
ORDER BY named.queue
