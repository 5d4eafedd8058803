-- The relay's next batch: the oldest rows of one queue, locked until the
-- relay's transaction ends (it deletes the rows the service accepted, then
-- commits). Rows another relay holds are skipped, so relays run side by
-- side; a relay that dies releases its rows with its connection.
SELECT id, body
FROM taskclaim.outbox
WHERE queue = %(queue)s::text
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
