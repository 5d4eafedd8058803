-- claim_tasks() inside a transaction, and where claim_many.sql found an
-- expired claim or lost a race:
-- claims many distinct keys for a window of seconds in one statement, as
-- claim.sql does for one, never failing on a key another session inserts
-- meanwhile. Returns each key it claimed with its
-- fresh token; a key an unexpired claim holds is absent. Rows are locked in
-- one order (bytewise), so overlapping bulk claims never deadlock. The keys
-- come as one binary array (the b placeholder): no text quoting either way.
INSERT INTO taskclaim.claim AS c (key, expires_at, token)
SELECT
  claimed.key,
  statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
  gen_random_uuid()
FROM unnest(%(keys)b::text[]) AS claimed (key)
ORDER BY claimed.key COLLATE "C"
ON CONFLICT (key) DO UPDATE SET
  expires_at = EXCLUDED.expires_at,
  token = EXCLUDED.token
WHERE c.expires_at < statement_timestamp()
RETURNING c.key, c.token::text
