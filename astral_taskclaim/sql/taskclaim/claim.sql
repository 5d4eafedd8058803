-- claim_task(): claims a key for a window of seconds. Returns the fresh
-- token, or no row while an unexpired claim holds the key. An expired row is
-- replaced in place, so the key never needs a separate cleanup first.
INSERT INTO taskclaim.claim AS c (key, expires_at, token)
VALUES (
  %(key)s,
  CURRENT_TIMESTAMP + make_interval(secs => %(seconds)s::double precision),
  gen_random_uuid()
)
ON CONFLICT (key) DO UPDATE SET
  expires_at = EXCLUDED.expires_at,
  token = EXCLUDED.token
WHERE c.expires_at < CURRENT_TIMESTAMP
RETURNING token
