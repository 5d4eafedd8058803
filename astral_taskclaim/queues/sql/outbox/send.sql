-- send() and send_many() of a remote queue with an outbox: the encoded
-- bodies, in order, for the relay to send.
INSERT INTO taskclaim.outbox (queue, body)
SELECT %(queue)s::text, body
FROM unnest(%(bodies)b::text[]) WITH ORDINALITY AS item (body, position)
ORDER BY position
