-- A trailing-mode message sent at once starts its run: its key is held a
-- window from now by its own token, if its token still holds the key, or
-- the key is free (its claim ran out while the message waited in a
-- backlog). Returns the token; no row while another token holds the key:
-- that later claim was made after this trigger, so its run carries the
-- trigger, and this message is superseded (not run beside it).
INSERT INTO taskclaim.claim AS c (key, expires_at, token)
VALUES (
  %(key)s::text,
  statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
  %(token)s::uuid
)
ON CONFLICT (key) DO UPDATE SET
  expires_at = EXCLUDED.expires_at,
  token = EXCLUDED.token
WHERE c.token = EXCLUDED.token OR c.expires_at < statement_timestamp()
RETURNING c.token::text
