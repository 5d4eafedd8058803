-- Unleased messages coming due in each bucket of bucket_seconds from now,
-- bucket 0 first, up to the given number of buckets; empty buckets are
-- absent. One range of message_queue_visible_at_idx per queue.
SELECT
  floor(
    extract(epoch FROM m.visible_at - statement_timestamp()) / %(bucket_seconds)s::int
  )::int AS bucket,
  count(*) AS messages
FROM unnest(%(queues)s::text[]) AS q (queue)
JOIN taskclaim.message AS m ON m.queue = q.queue
WHERE m.visible_at > statement_timestamp()
  AND m.visible_at < statement_timestamp()
                     + make_interval(secs => %(bucket_seconds)s::int * %(buckets)s::int)
  AND m.lease IS NULL
GROUP BY 1
ORDER BY 1;
