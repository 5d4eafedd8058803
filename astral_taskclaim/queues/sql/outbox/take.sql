-- The relay's next batch: the due rows of one queue (not set aside, their
-- available_at reached), earliest first, locked until the relay's
-- transaction ends (it deletes the rows the service accepted, records the
-- failures of the others, then commits). Rows another relay holds are
-- skipped, so relays run side by side; a relay that dies releases its rows
-- with its connection.
SELECT id, body, attempts
FROM taskclaim.outbox
WHERE queue = %(queue)s::text
  AND dead_at IS NULL
  AND available_at <= statement_timestamp()
ORDER BY available_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
