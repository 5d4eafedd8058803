-- A slot won (the table: migrations/sql/0011_schedule.sql), recorded before
-- its task is enqueued, in the same transaction: the schedule's newest slot
-- moves forward only. No row comes back when the record already holds this
-- slot or a newer one (a worker whose clock runs ahead enqueued it, however
-- long ago its slot claim expired), and the caller enqueues nothing; the
-- row's lock makes racing workers take their turns. outcome.sql then says
-- what the enqueue did.
INSERT INTO taskclaim.schedule AS s (name, last_slot, outcome)
VALUES (%(name)s::text, %(slot)s::timestamptz, 'started')
ON CONFLICT (name) DO UPDATE SET
  last_slot = EXCLUDED.last_slot,
  enqueued_at = statement_timestamp(),
  outcome = EXCLUDED.outcome,
  slots = s.slots + 1
WHERE s.last_slot < EXCLUDED.last_slot
RETURNING true
