-- Seconds until the queue's next message becomes visible (NULL: empty).
SELECT EXTRACT(EPOCH FROM min(visible_at) - clock_timestamp())::float8
FROM taskclaim.message
WHERE queue = %(queue)s
