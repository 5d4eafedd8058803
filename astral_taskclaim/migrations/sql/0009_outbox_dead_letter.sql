-- What the outbox relay needs so that one row never blocks the others. Each
-- row counts its failed sends and keeps the last error; a row waits until
-- available_at (a deferred task's run_after, or a backoff after a failed
-- send); a row the service refuses for good is set aside (dead_at), kept for
-- the admin's retry and delete actions.
ALTER TABLE taskclaim.outbox
  ADD COLUMN attempts integer NOT NULL DEFAULT 0,
  ADD COLUMN last_error text,
  ADD COLUMN available_at timestamptz NOT NULL DEFAULT statement_timestamp(),
  ADD COLUMN dead_at timestamptz;
-- The relay takes the due rows of one queue, earliest first.
CREATE INDEX outbox_due_idx ON taskclaim.outbox (queue, available_at, id)
  WHERE dead_at IS NULL;
-- The status counts the rows set aside; there should be few.
CREATE INDEX outbox_dead_idx ON taskclaim.outbox (queue, id)
  WHERE dead_at IS NOT NULL;
