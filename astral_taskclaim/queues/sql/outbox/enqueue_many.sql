-- enqueue_claimed_many() on a remote queue with an outbox: claims distinct
-- keys with the tokens given (in bytewise order, so overlapping calls never
-- deadlock) and writes the body of each key it claimed to the outbox, in the
-- caller's order, in one statement. Returns the keys claimed. The arrays
-- come in binary (the b placeholders): no text quoting of JSON bodies.
WITH item AS (
  SELECT key, token, body, position
  FROM unnest(%(keys)b::text[], %(tokens)b::uuid[], %(bodies)b::text[])
    WITH ORDINALITY AS item (key, token, body, position)
), claimed AS (
  INSERT INTO taskclaim.claim AS c (key, expires_at, token)
  SELECT
    item.key,
    statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
    item.token
  FROM item
  ORDER BY item.key COLLATE "C"
  ON CONFLICT (key) DO UPDATE SET
    expires_at = EXCLUDED.expires_at,
    token = EXCLUDED.token
  WHERE c.expires_at < statement_timestamp()
  RETURNING c.key
), boxed AS (
  INSERT INTO taskclaim.outbox (queue, body)
  SELECT %(queue)s::text, item.body
  FROM item JOIN claimed ON claimed.key = item.key
  ORDER BY item.position
)
SELECT key FROM claimed
