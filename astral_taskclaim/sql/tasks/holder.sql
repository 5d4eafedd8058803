-- The token of the unexpired claim holding a key, if any.
SELECT token::text FROM taskclaim.claim
WHERE key = %(key)s AND expires_at >= CURRENT_TIMESTAMP
