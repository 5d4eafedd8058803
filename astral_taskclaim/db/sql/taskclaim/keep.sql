-- Keeps the claims of messages a worker is running from running out: each
-- claim still held by its message's token, and ending within two thirds of
-- `seconds` (its window, at most a minute), ends `seconds` from now. A
-- claim already released, or taken by a later token, is left alone. A
-- worker that dies stops keeping, and its keys free at most `seconds` after
-- its last beat. Returns the keys it kept and their tokens.
UPDATE taskclaim.claim AS c
SET expires_at = statement_timestamp() + make_interval(secs => kept.seconds)
FROM unnest(%(keys)s::text[], %(tokens)s::uuid[], %(seconds)s::double precision[])
  AS kept (key, token, seconds)
WHERE c.key = kept.key
  AND c.token = kept.token
  AND c.expires_at < statement_timestamp() + make_interval(secs => kept.seconds * 2 / 3)
RETURNING c.key, c.token::text
