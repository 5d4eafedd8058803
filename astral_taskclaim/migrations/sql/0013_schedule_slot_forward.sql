-- taskclaim.enqueue_schedule_slot() (0012_schedule_slot.sql) with the
-- schedule's record as its gate, as a worker's ticker has it: the slot is
-- recorded before its task is enqueued, and only when it is newer than the
-- newest recorded slot. So a worker whose clock runs ahead, having enqueued
-- a slot whose claim has since expired, cannot have pg_cron enqueue it
-- again. Recorded in the same order as the worker's (slot claim, record,
-- task claim), so the two never wait on each other in opposite orders.
-- Returns 'enqueued' or 'coalesced', or NULL when the slot was already
-- taken or recorded.
CREATE OR REPLACE FUNCTION taskclaim.enqueue_schedule_slot(
  schedule       text,
  slot_seconds   double precision,
  queue          text,
  task_key       text,
  window_seconds double precision,
  body_head      text,
  body_tail      text,
  slot           timestamptz DEFAULT NULL
)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
DECLARE
  v_slot    timestamptz := coalesce(slot, date_trunc('minute', statement_timestamp(), 'UTC'));
  v_text    text := to_char(v_slot AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
  v_key     text := schedule || '@' || v_text;
  v_task    text := replace(task_key, '{slot}', v_text);
  v_sent    bigint;
  v_outcome text;
BEGIN
  INSERT INTO taskclaim.claim AS c (key, expires_at, token)
  SELECT v_key, statement_timestamp() + make_interval(secs => slot_seconds), gen_random_uuid()
  WHERE NOT EXISTS (
    SELECT FROM taskclaim.claim AS held
    WHERE held.key = v_key AND held.expires_at >= statement_timestamp()
  )
  ON CONFLICT (key) DO UPDATE SET
    expires_at = EXCLUDED.expires_at,
    token = EXCLUDED.token
  WHERE c.expires_at < statement_timestamp();
  IF NOT FOUND THEN
    RETURN NULL;  -- a worker or an earlier run has the slot
  END IF;

  -- The record moves forward only, as a worker's (schedule/record.sql):
  -- a slot at or before the newest recorded one was enqueued already, by a
  -- worker whose clock ran ahead, however long ago its slot claim expired.
  INSERT INTO taskclaim.schedule AS s (name, last_slot, outcome)
  VALUES (schedule, v_slot, 'started')
  ON CONFLICT (name) DO UPDATE SET
    last_slot = EXCLUDED.last_slot,
    enqueued_at = statement_timestamp(),
    outcome = EXCLUDED.outcome,
    slots = s.slots + 1
  WHERE s.last_slot < EXCLUDED.last_slot;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  WITH claimed AS (
    INSERT INTO taskclaim.claim AS c (key, expires_at, token)
    SELECT v_task, statement_timestamp() + make_interval(secs => window_seconds), gen_random_uuid()
    WHERE NOT EXISTS (
      SELECT FROM taskclaim.claim AS held
      WHERE held.key = v_task AND held.expires_at >= statement_timestamp()
    )
    ON CONFLICT (key) DO UPDATE SET
      expires_at = EXCLUDED.expires_at,
      token = EXCLUDED.token
    WHERE c.expires_at < statement_timestamp()
    RETURNING c.token
  )
  INSERT INTO taskclaim.message (queue, body)
  SELECT enqueue_schedule_slot.queue,
         replace(body_head, '{slot}', v_text) || claimed.token::text || body_tail
  FROM claimed;
  GET DIAGNOSTICS v_sent = ROW_COUNT;
  v_outcome := CASE WHEN v_sent > 0 THEN 'enqueued' ELSE 'coalesced' END;

  UPDATE taskclaim.schedule AS s SET outcome = v_outcome
  WHERE s.name = enqueue_schedule_slot.schedule AND s.last_slot = v_slot;
  RETURN v_outcome;
END;
$$;

