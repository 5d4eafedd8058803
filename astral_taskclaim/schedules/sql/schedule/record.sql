-- A slot won (the table: migrations/sql/0011_schedule.sql): the schedule's newest slot moves forward (slots of one
-- schedule may be recorded out of order by racing workers; the newest
-- stays), its outcome and time are the latest write's.
INSERT INTO taskclaim.schedule AS s (name, last_slot, outcome)
VALUES (%(name)s::text, %(slot)s::timestamptz, %(outcome)s::text)
ON CONFLICT (name) DO UPDATE SET
  last_slot = greatest(s.last_slot, EXCLUDED.last_slot),
  enqueued_at = statement_timestamp(),
  outcome = EXCLUDED.outcome,
  slots = s.slots + 1
