-- send() and send_many() of a remote queue with an outbox: the encoded
-- bodies, in order, for the relay to send once delay seconds have passed.
INSERT INTO taskclaim.outbox (queue, body, available_at)
SELECT
  %(queue)s::text,
  body,
  statement_timestamp() + make_interval(secs => %(delay)s::double precision)
FROM unnest(%(bodies)b::text[]) WITH ORDINALITY AS item (body, position)
ORDER BY position
