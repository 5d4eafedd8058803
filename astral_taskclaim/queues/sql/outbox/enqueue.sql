-- enqueue_claimed() on a remote queue with an outbox: claims a key as
-- taskclaim/claim.sql does, with the token the caller drew (its body carries
-- it), and writes the body to the outbox only if the claim was made, in one
-- statement: claim and message commit together, with the caller's
-- transaction. The window runs from the statement's start. Returns the
-- token, or no row while an unexpired claim holds the key.
WITH claimed AS (
  INSERT INTO taskclaim.claim AS c (key, expires_at, token)
  SELECT
    %(key)s::text,
    statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
    %(token)s::uuid
  WHERE NOT EXISTS (
    SELECT FROM taskclaim.claim AS held
    WHERE held.key = %(key)s::text AND held.expires_at >= statement_timestamp()
  )
  ON CONFLICT (key) DO UPDATE SET
    expires_at = EXCLUDED.expires_at,
    token = EXCLUDED.token
  WHERE c.expires_at < statement_timestamp()
  RETURNING c.token::text
), boxed AS (
  INSERT INTO taskclaim.outbox (queue, body)
  SELECT %(queue)s::text, %(body)s::text
  FROM claimed
)
SELECT token FROM claimed
