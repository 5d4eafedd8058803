-- Undoes 0013_schedule_slot_forward.sql: the function as 0012 made it.
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

  INSERT INTO taskclaim.schedule AS s (name, last_slot, outcome)
  VALUES (schedule, v_slot, v_outcome)
  ON CONFLICT (name) DO UPDATE SET
    last_slot = greatest(s.last_slot, EXCLUDED.last_slot),
    enqueued_at = statement_timestamp(),
    outcome = EXCLUDED.outcome,
    slots = s.slots + 1;
  RETURN v_outcome;
END;
$$;

