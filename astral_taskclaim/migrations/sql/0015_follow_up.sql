-- Migration 0015: trailing runs. A trigger that arrives while its key is
-- claimed, with enqueue_claimed(trailing=...), becomes the key's one pending
-- follow-up run, queued as a delayed message for the moment the claim ends
-- (taskclaim/trail.sql) and claimed by that message's delivery
-- (taskclaim/follow_up.sql), which marks it taken; a taken one stays for
-- its run's retries until the key's next follow-up is taken. The
-- TypeScript package never reads it.
CREATE TABLE taskclaim.follow_up
(
  -- The claim token the follow-up run holds; its message carries it.
  token          uuid PRIMARY KEY,
  key            text NOT NULL,
  -- The task the follow-up runs (JSON text: the latest trigger's, or the
  -- first's in "first" mode) and its window.
  task           text NOT NULL,
  window_seconds double precision NOT NULL CHECK (window_seconds >= 0),
  -- The first trigger it holds, and the latest that wrote it.
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  -- When a delivery of its message claimed the key and started its run.
  taken_at       timestamptz,
  -- Debouncing (trailing=Debounce(...)): it runs once no trigger came for
  -- debounce_seconds, or max_wait_seconds after created_at; else NULL.
  debounce_seconds double precision CHECK (debounce_seconds > 0),
  max_wait_seconds double precision CHECK (max_wait_seconds >= 0)
);
-- One pending follow-up per key; the key's rows, for the sends that supersede them.
CREATE UNIQUE INDEX follow_up_pending_key ON taskclaim.follow_up (key) WHERE taken_at IS NULL;
CREATE INDEX follow_up_key ON taskclaim.follow_up (key);

COMMENT ON TABLE taskclaim.follow_up IS 'Pending trailing runs of astral_taskclaim''s claimed tasks, one per key.';
