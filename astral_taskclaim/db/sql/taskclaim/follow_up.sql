-- A follow-up run's message is delivered: claims its key with the
-- follow-up's token, if the follow-up is still pending under that token
-- (debouncing: the key was quiet long enough, or its maximum wait passed)
-- and no other claim holds the key (a delivery again of the same message
-- claims again), marks it taken and drops the key's earlier taken ones,
-- whose runs are over (this claim is made). Returns one row: its task and window
-- to run now; or, while another claim holds the key, the seconds until
-- that claim ends (`wait`: deliver it then); no row when the follow-up is
-- gone (a send now or a later follow-up superseded it: nothing to run).
--
-- The follow-up's row is locked before anything is decided, and decided on
-- as locked: a trigger merging into it (merge.sql, trail.sql) concurrently
-- either committed before (its pushed-back updated_at is read here) or
-- waits for this statement (and then finds it taken: it starts the key's
-- next follow-up). The key's claim row is locked before it, the order
-- trail.sql takes them in (claim, then follow-up), so the two cannot
-- deadlock.
WITH key_claim AS (
  SELECT key FROM taskclaim.claim WHERE key = %(key)s::text FOR UPDATE
), locked AS (
  SELECT * FROM taskclaim.follow_up
  WHERE key = %(key)s::text AND token = %(token)s::uuid
    AND (SELECT count(*) FROM key_claim) >= 0  -- the claim's lock first
  FOR UPDATE
), claimed AS (
  INSERT INTO taskclaim.claim AS c (key, expires_at, token)
  SELECT f.key, statement_timestamp() + make_interval(secs => f.window_seconds), f.token
  FROM locked AS f
  -- Debouncing: the key was quiet long enough, or the maximum wait passed.
  WHERE (
      f.debounce_seconds IS NULL
      OR statement_timestamp() >= f.updated_at + make_interval(secs => f.debounce_seconds)
      OR statement_timestamp() >= f.created_at + make_interval(secs => f.max_wait_seconds)
    )
    AND NOT EXISTS (
      SELECT FROM taskclaim.claim AS held
      WHERE held.key = %(key)s::text
        AND held.expires_at >= statement_timestamp()
        AND held.token <> %(token)s::uuid
    )
  ON CONFLICT (key) DO UPDATE SET
    expires_at = EXCLUDED.expires_at,
    token = EXCLUDED.token
  WHERE c.expires_at < statement_timestamp() OR c.token = EXCLUDED.token
  RETURNING c.token
), taken AS (
  UPDATE taskclaim.follow_up AS f SET taken_at = statement_timestamp()
  WHERE f.key = %(key)s::text AND f.token = %(token)s::uuid AND EXISTS (SELECT FROM claimed)
  RETURNING f.task, f.window_seconds
), done AS (
  DELETE FROM taskclaim.follow_up AS f
  WHERE f.key = %(key)s::text AND f.token <> %(token)s::uuid AND f.taken_at IS NOT NULL
    AND EXISTS (SELECT FROM claimed)
)
SELECT task, window_seconds, NULL::double precision FROM taken
UNION ALL
-- Held by another claim, or not quiet long enough: the seconds until
-- both have ended (no more than a moment when a claim that committed after
-- this statement's snapshot holds the key).
SELECT NULL, NULL, greatest(
  extract(epoch FROM (
    SELECT held.expires_at - statement_timestamp() FROM taskclaim.claim AS held
    WHERE held.key = %(key)s::text AND held.token <> %(token)s::uuid
  ))::double precision,
  CASE WHEN f.debounce_seconds IS NOT NULL THEN extract(epoch FROM least(
    f.updated_at + make_interval(secs => f.debounce_seconds),
    f.created_at + make_interval(secs => f.max_wait_seconds)
  ) - statement_timestamp())::double precision END,
  0
)
FROM locked AS f
WHERE NOT EXISTS (SELECT FROM claimed)
