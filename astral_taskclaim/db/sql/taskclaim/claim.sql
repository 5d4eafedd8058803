-- claim_task(): claims a key for a window of seconds. Returns the fresh
-- token, or no row while an unexpired claim holds the key. An expired row is
-- replaced in place, so the key never needs a separate cleanup first.
--
-- Read first: a key an unexpired claim holds (most triggers: they coalesce)
-- is answered from the statement's snapshot, so the INSERT gets no row, locks
-- nothing and takes no transaction id, and its commit waits for no WAL
-- flush. A free or expired key goes on to the upsert, whose ON CONFLICT
-- WHERE is checked again on the newest row version once any concurrent
-- claimer of the key has committed: of two racing claims, one wins.
--
-- Time is the statement's (statement_timestamp()), never the transaction's
-- start (CURRENT_TIMESTAMP): a claim made late in a long transaction still
-- holds its whole window from the call, and a claim that expired after the
-- transaction began is seen as expired. Every claim write does the same.
INSERT INTO taskclaim.claim AS c (key, expires_at, token)
SELECT
  %(key)s::text,
  statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
  gen_random_uuid()
WHERE NOT EXISTS (
  SELECT FROM taskclaim.claim AS held
  WHERE held.key = %(key)s::text AND held.expires_at >= statement_timestamp()
)
ON CONFLICT (key) DO UPDATE SET
  expires_at = EXCLUDED.expires_at,
  token = EXCLUDED.token
WHERE c.expires_at < statement_timestamp()
RETURNING token::text
