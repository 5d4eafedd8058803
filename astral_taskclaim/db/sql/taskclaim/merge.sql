-- The hot path of enqueue_claimed(trailing=...): a trigger on a key that a
-- claim holds and whose follow-up is pending merges into the follow-up. In
-- 'latest' mode it writes its task into it; in 'first' mode it only reads,
-- taking no transaction id. Returns the follow-up's token, or no row (the
-- key is free, no follow-up is pending, or it was taken meanwhile): then
-- trail.sql decides. (A free key is claimed and sent now, superseding a
-- pending follow-up whose message may be lost.)
WITH merged AS (
  UPDATE taskclaim.follow_up AS f
  SET task = %(task)s::text,
    window_seconds = %(seconds)s::double precision,
    updated_at = statement_timestamp()
  WHERE f.key = %(key)s::text AND f.taken_at IS NULL AND %(latest)s::boolean
    AND EXISTS (
      SELECT FROM taskclaim.claim AS held
      WHERE held.key = %(key)s::text AND held.expires_at >= statement_timestamp()
    )
  RETURNING f.token
)
SELECT token::text FROM merged
UNION ALL
SELECT f.token::text FROM taskclaim.follow_up AS f
WHERE f.key = %(key)s::text AND f.taken_at IS NULL AND NOT %(latest)s::boolean
  AND EXISTS (
    SELECT FROM taskclaim.claim AS held
    WHERE held.key = %(key)s::text AND held.expires_at >= statement_timestamp()
  )
