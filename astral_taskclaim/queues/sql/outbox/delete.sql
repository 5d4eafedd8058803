-- Deletes the outbox rows the service accepted.
DELETE FROM taskclaim.outbox
WHERE id = ANY(%(ids)s::bigint[])
