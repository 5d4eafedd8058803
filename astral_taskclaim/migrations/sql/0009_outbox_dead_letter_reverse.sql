-- Undoes 0009_outbox_dead_letter.sql: rows set aside become due again.
DROP INDEX taskclaim.outbox_dead_idx;
DROP INDEX taskclaim.outbox_due_idx;
ALTER TABLE taskclaim.outbox
  DROP COLUMN dead_at,
  DROP COLUMN available_at,
  DROP COLUMN last_error,
  DROP COLUMN attempts;
