-- The token of the unexpired claim holding a key, if any, at the statement's
-- time as every claim write (taskclaim/claim.sql) judges it.
SELECT token::text FROM taskclaim.claim
WHERE key = %(key)s AND expires_at >= statement_timestamp()
