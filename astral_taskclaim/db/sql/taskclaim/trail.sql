-- enqueue_claimed(trailing=...): claims a free key for the caller's token
-- as claim.sql does (dropping a pending follow-up, which this send now
-- supersedes); while a claim holds the key, records the trigger as the
-- key's one pending follow-up run instead of dropping it. Returns one row:
-- 'sent' (claimed: send the task now), 'follow_up_created' (send the
-- follow-up's message, due when the claim ends: `wait` seconds) or 'merged'
-- (a follow-up was pending: in 'latest' mode this task replaced its task;
-- in 'first' mode nothing is written, so hot keys stay read-only), with the
-- token of the run that will carry the trigger.
--
-- With `debounce` (seconds), a free key is not claimed either: the trigger
-- creates the follow-up, due once the key was quiet that long, or pushes
-- it back (updated_at), writing the task in 'latest' mode only.
--
-- A follow-up already taken (its run started) is not pending: the trigger
-- came after that run's start, so it starts the key's next follow-up.
WITH claimed AS (
  -- include: taskclaim/claim.sql
  --   replacing: gen_random_uuid()
  --   with: %(token)s::uuid
  --   replacing: WHERE NOT EXISTS (
  --   with: WHERE %(debounce)s::double precision IS NULL AND NOT EXISTS (
), superseded AS (
  DELETE FROM taskclaim.follow_up
  WHERE key = %(key)s::text AND EXISTS (SELECT FROM claimed)
), pending AS (
  SELECT token FROM taskclaim.follow_up
  WHERE key = %(key)s::text AND taken_at IS NULL
), written AS (
  INSERT INTO taskclaim.follow_up AS f
    (token, key, task, window_seconds, created_at, updated_at, debounce_seconds,
      max_wait_seconds)
  SELECT %(token)s::uuid, %(key)s::text, %(task)s::text, %(seconds)s::double precision,
    statement_timestamp(), statement_timestamp(), %(debounce)s::double precision,
    %(max_wait)s::double precision
  WHERE NOT EXISTS (SELECT FROM claimed)
    AND (%(latest)s::boolean OR %(debounce)s::double precision IS NOT NULL
      OR NOT EXISTS (SELECT FROM pending))
  -- A pending one: its task is this one's in 'latest' mode (in 'first'
  -- mode only when it was created since this statement's snapshot).
  ON CONFLICT (key) WHERE taken_at IS NULL DO UPDATE SET
    task = CASE WHEN %(latest)s::boolean THEN EXCLUDED.task ELSE f.task END,
    window_seconds = CASE WHEN %(latest)s::boolean
      THEN EXCLUDED.window_seconds ELSE f.window_seconds END,
    debounce_seconds = EXCLUDED.debounce_seconds,
    max_wait_seconds = EXCLUDED.max_wait_seconds,
    updated_at = EXCLUDED.updated_at
  RETURNING f.token
)
SELECT 'sent', token::text, NULL::double precision FROM claimed
UNION ALL
SELECT
  CASE WHEN w.token = %(token)s::uuid THEN 'follow_up_created' ELSE 'merged' END,
  w.token::text,
  greatest(
    extract(epoch FROM (
      SELECT held.expires_at - statement_timestamp() FROM taskclaim.claim AS held
      WHERE held.key = %(key)s::text
    ))::double precision,
    %(debounce)s::double precision
  )
FROM written AS w
UNION ALL
SELECT 'merged', p.token::text, NULL
FROM pending AS p
WHERE NOT EXISTS (SELECT FROM claimed) AND NOT %(latest)s::boolean
  AND %(debounce)s::double precision IS NULL
