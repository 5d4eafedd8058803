-- The hot path of enqueue_claimed(trailing=...): a trigger on a key that a
-- claim holds (or, debouncing, any key) whose follow-up is pending merges
-- into the follow-up. In 'latest' mode it writes its task into it;
-- debouncing, it pushes the follow-up back (updated_at); in 'first' mode
-- without debounce it only reads, taking no transaction id. Returns the
-- follow-up's token, or no row (the key is free, no follow-up is pending,
-- or it was taken meanwhile): then trail.sql decides. (A free key is
-- claimed and sent now, superseding a pending follow-up whose message may
-- be lost.)
WITH merged AS (
  UPDATE taskclaim.follow_up AS f
  SET task = CASE WHEN %(latest)s::boolean THEN %(task)s::text ELSE f.task END,
    window_seconds = CASE WHEN %(latest)s::boolean
      THEN %(seconds)s::double precision ELSE f.window_seconds END,
    debounce_seconds = %(debounce)s::double precision,
    max_wait_seconds = %(max_wait)s::double precision,
    updated_at = statement_timestamp()
  WHERE f.key = %(key)s::text AND f.taken_at IS NULL
    AND (%(latest)s::boolean OR %(debounce)s::double precision IS NOT NULL)
    AND (%(debounce)s::double precision IS NOT NULL OR EXISTS (
      SELECT FROM taskclaim.claim AS held
      WHERE held.key = %(key)s::text AND held.expires_at >= statement_timestamp()
    ))
  RETURNING f.token
)
SELECT token::text FROM merged
UNION ALL
SELECT f.token::text FROM taskclaim.follow_up AS f
WHERE f.key = %(key)s::text AND f.taken_at IS NULL
  AND NOT %(latest)s::boolean AND %(debounce)s::double precision IS NULL
  AND EXISTS (
    SELECT FROM taskclaim.claim AS held
    WHERE held.key = %(key)s::text AND held.expires_at >= statement_timestamp()
  )
