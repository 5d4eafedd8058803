-- hold_task(): keeps a key claimed by a token until a retry is due plus one
-- more window, from the statement's time as in claim.sql. A freed key is
-- claimed again by the same token; a row holding another token (a later
-- claim) is left as it is.
INSERT INTO taskclaim.claim AS c (key, expires_at, token)
VALUES (
  %(key)s,
  statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
  %(token)s::uuid
)
ON CONFLICT (key) DO UPDATE SET
  expires_at = EXCLUDED.expires_at
WHERE c.token = EXCLUDED.token
