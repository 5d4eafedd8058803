-- How many of one queue's messages name each task: the body's "taskName"
-- as JSON text (NULL: the body has none). The name stays JSON, never
-- de-escaped to text, so a name with \u0000 is counted like any other.
-- Reads every message of the queue, as status.sql does.
SELECT (body::json -> 'taskName')::text AS name, count(*) AS messages
FROM taskclaim.message
WHERE queue = %(queue)s
GROUP BY 1
ORDER BY 1 NULLS FIRST
