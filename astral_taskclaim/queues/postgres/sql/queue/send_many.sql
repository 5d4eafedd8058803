-- Several messages in one statement, ids in the order given.
INSERT INTO taskclaim.message (queue, body)
SELECT %(queue)s, sent.body
FROM unnest(%(bodies)s::text[]) WITH ORDINALITY AS sent (body, position)
ORDER BY sent.position
