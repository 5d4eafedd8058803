-- enqueue_claimed() on the PostgreSQL queue: claims a key as claim.sql does,
-- with the token the caller drew (its message body carries it), and queues
-- that message only if the claim was made, all in one statement: claim and
-- message commit together, in one round trip. Returns the token, or no row
-- while an unexpired claim holds the key (and then nothing is queued).
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
), sent AS (
  INSERT INTO taskclaim.message (queue, body)
  SELECT %(queue)s::text, %(body)s::text
  FROM claimed
)
SELECT token FROM claimed
