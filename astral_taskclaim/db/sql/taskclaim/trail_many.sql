-- enqueue_claimed_many(trailing="latest" or "first") on the PostgreSQL
-- queue: trail.sql (with merge.sql's or merge_first.sql's hot path) for
-- every item, in one statement, as if the items came one after the other:
-- per key, the first item claims a free key (bytewise order, as
-- bulk_enqueue.sql) and is 'sent'; the next creates the key's follow-up
-- run, due when that claim ends ('follow_up_created'); later ones are
-- 'merged' into it. On a held key the first item creates the follow-up
-- (or merges into the pending one) and later ones merge. In 'latest' mode
-- the follow-up's task is the key's last item's; in 'first' mode a
-- pending follow-up is not written (hot keys stay read-only). A key this
-- statement claims supersedes its follow-ups (deleted, or the pending one
-- replaced by the new follow-up in place). Each item brings a token and
-- the two bodies it may be queued with ('sent': trailing; created:
-- followUp), NULL where its position rules one out. Returns each item's
-- outcome and the token of the run that carries it, in the caller's order.
WITH item AS (
  SELECT key, token, task, sent_body, follow_body, position,
    row_number() OVER (PARTITION BY key ORDER BY position) AS nth,
    count(*) OVER (PARTITION BY key) AS total,
    last_value(task) OVER (PARTITION BY key ORDER BY position
      ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last_task
  FROM unnest(%(keys)b::text[], %(tokens)b::uuid[], %(tasks)b::text[],
    %(sent)b::text[], %(follow)b::text[])
    WITH ORDINALITY AS item (key, token, task, sent_body, follow_body, position)
), claimed AS (
  -- include: taskclaim/claim.sql
  --   replacing: %(key)s::text,
  --   with: item.key,
  --   replacing: gen_random_uuid()
  --   with: item.token
  --   replacing: WHERE NOT EXISTS (
  --   with: FROM item WHERE item.nth = 1 AND NOT EXISTS (
  --   replacing: held.key = %(key)s::text
  --   with: held.key = item.key
  --   replacing: ON CONFLICT (key)
  --   with: ORDER BY item.key COLLATE "C" ON CONFLICT (key)
  --   replacing: RETURNING token::text
  --   with: RETURNING c.key
), placed AS (
  -- Each item, and whether this statement claimed its key: known once
  -- every claim is written (the aggregate reads them all), so a call
  -- locks all its claim rows before any follow-up row, each write in
  -- bytewise key order.
  SELECT item.*, item.key = ANY (won.keys) AS won
  FROM item, (SELECT coalesce(array_agg(key), '{}') AS keys FROM claimed) AS won
), superseded AS (
  -- A key claimed now: its follow-ups go, but a pending one that the key's
  -- next item replaces (renewed).
  DELETE FROM taskclaim.follow_up AS f
  USING placed
  WHERE placed.won AND placed.nth = 1 AND f.key = placed.key
    AND (placed.total = 1 OR f.taken_at IS NOT NULL)
), renewed AS (
  -- A key claimed now and triggered again: its next item creates the
  -- key's follow-up, as a fresh one.
  INSERT INTO taskclaim.follow_up AS f
    (token, key, task, window_seconds, created_at, updated_at)
  SELECT token, key, CASE WHEN %(latest)s::boolean THEN last_task ELSE task END,
    %(seconds)s::double precision, statement_timestamp(), statement_timestamp()
  FROM placed WHERE won AND nth = 2
  ORDER BY key COLLATE "C"
  ON CONFLICT (key) WHERE taken_at IS NULL DO UPDATE SET
    token = EXCLUDED.token,
    task = EXCLUDED.task,
    window_seconds = EXCLUDED.window_seconds,
    created_at = EXCLUDED.created_at,
    updated_at = EXCLUDED.updated_at,
    debounce_seconds = NULL,
    max_wait_seconds = NULL
  RETURNING f.key, f.token
), pending AS (
  SELECT f.key, f.token FROM taskclaim.follow_up AS f
  JOIN placed ON placed.key = f.key AND placed.nth = 1 AND NOT placed.won
  WHERE f.taken_at IS NULL
), written AS (
  -- A key a claim holds: trail.sql's follow-up write, for its first item.
  INSERT INTO taskclaim.follow_up AS f
    (token, key, task, window_seconds, created_at, updated_at)
  SELECT token, key, CASE WHEN %(latest)s::boolean THEN last_task ELSE task END,
    %(seconds)s::double precision, statement_timestamp(), statement_timestamp()
  FROM placed
  WHERE NOT won AND nth = 1
    AND (%(latest)s::boolean OR NOT EXISTS (SELECT FROM pending WHERE pending.key = placed.key))
  ORDER BY key COLLATE "C"
  ON CONFLICT (key) WHERE taken_at IS NULL DO UPDATE SET
    task = CASE WHEN %(latest)s::boolean THEN EXCLUDED.task ELSE f.task END,
    window_seconds = CASE WHEN %(latest)s::boolean
      THEN EXCLUDED.window_seconds ELSE f.window_seconds END,
    debounce_seconds = NULL,
    max_wait_seconds = NULL,
    updated_at = EXCLUDED.updated_at
  RETURNING f.key, f.token
), carrier AS (
  SELECT key, token FROM renewed
  UNION ALL
  SELECT key, token FROM written
  UNION ALL
  SELECT key, token FROM pending WHERE NOT %(latest)s::boolean
), outcome AS (
  SELECT placed.position,
    CASE WHEN placed.won AND placed.nth = 1 THEN 'sent'
      WHEN carrier.token = placed.token THEN 'follow_up_created'
      ELSE 'merged' END AS outcome,
    CASE WHEN placed.won AND placed.nth = 1 THEN placed.token
      ELSE carrier.token END AS token,
    placed.sent_body, placed.follow_body,
    CASE WHEN placed.won THEN %(seconds)s::double precision
      ELSE extract(epoch FROM (
        SELECT held.expires_at - statement_timestamp() FROM taskclaim.claim AS held
        WHERE held.key = placed.key
      ))::double precision END AS wait
  FROM placed LEFT JOIN carrier ON carrier.key = placed.key
), queued AS (
  INSERT INTO taskclaim.message (queue, body, visible_at)
  SELECT %(queue)s::text,
    CASE WHEN outcome = 'sent' THEN sent_body ELSE follow_body END,
    statement_timestamp() + CASE WHEN outcome = 'sent' THEN interval '0 s' ELSE make_interval(
      secs => least(greatest(coalesce(wait, 0), 0), %(max_delay)s::double precision)) END
  FROM outcome WHERE outcome <> 'merged'
  ORDER BY position
)
SELECT outcome, token::text FROM outcome ORDER BY position
