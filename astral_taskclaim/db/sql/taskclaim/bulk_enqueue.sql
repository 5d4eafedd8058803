-- enqueue_claimed_many() on the PostgreSQL queue: claims many distinct keys
-- with the tokens given (in bytewise order, as claim_many.sql does), and
-- queues the message of each key it claimed, in the caller's order, in one
-- statement: claims and messages commit together. Returns the keys claimed.
-- The arrays come in binary (the b placeholders): bodies are JSON, full of
-- quotes that text array syntax would have to escape.
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
), sent AS (
  INSERT INTO taskclaim.message (queue, body)
  SELECT %(queue)s::text, item.body
  FROM item JOIN claimed ON claimed.key = item.key
  ORDER BY item.position
)
SELECT key FROM claimed
