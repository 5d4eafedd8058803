-- Depth, oldest row and rows set aside of each named queue's outbox: rows
-- counted up to a bound (past it the depth is given as "more than"), the
-- oldest waiting row found by a probe of outbox_queue_id_idx, the rows set
-- aside counted on their own index.
SELECT
  named.queue,
  (SELECT count(*) FROM (
     SELECT FROM taskclaim.outbox AS o
     WHERE o.queue = named.queue AND o.dead_at IS NULL LIMIT %(bound)s
   ) AS counted)::integer,
  extract(epoch FROM statement_timestamp() - (
    SELECT o.enqueued_at FROM taskclaim.outbox AS o
    WHERE o.queue = named.queue AND o.dead_at IS NULL ORDER BY o.id LIMIT 1
  ))::double precision,
  (SELECT count(*) FROM (
     SELECT FROM taskclaim.outbox AS o
     WHERE o.queue = named.queue AND o.dead_at IS NOT NULL LIMIT %(bound)s
   ) AS counted)::integer
FROM unnest(%(queues)s::text[]) AS named (queue)
ORDER BY named.queue
