-- enqueue_claimed() on the PostgreSQL queue: claims a key as claim.sql does,
-- with the token the caller drew (its message body carries it), and queues
-- that message only if the claim was made, all in one statement: claim and
-- message commit together, in one round trip. Returns the token, or no row
-- while an unexpired claim holds the key (and then nothing is queued).
WITH claimed AS (
  -- include: taskclaim/claim.sql
  --   replacing: gen_random_uuid()
  --   with: %(token)s::uuid
), sent AS (
  INSERT INTO taskclaim.message (queue, body)
  SELECT %(queue)s::text, %(body)s::text
  FROM claimed
)
SELECT token FROM claimed
