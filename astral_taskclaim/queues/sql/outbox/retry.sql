-- The admin's retry: rows set aside (or waiting out a backoff) become due
-- now, their attempts counted afresh; the error stays until the next send.
UPDATE taskclaim.outbox
SET dead_at = NULL, attempts = 0, available_at = statement_timestamp()
WHERE id = ANY(%(ids)s::bigint[])
  AND (dead_at IS NOT NULL OR available_at > statement_timestamp())
