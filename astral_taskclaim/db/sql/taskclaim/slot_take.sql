-- Takes a slot of a concurrency group for a run: the first of the group's
-- slot keys (given in order, one per slot) that no unexpired claim holds,
-- or that the run's own token holds (a delivery again of its message), is
-- claimed with the run's token until `seconds` from now. Slots are rows of
-- taskclaim.claim, so the worker keeps a running message's slot as it keeps
-- its claim (keep.sql), and a dead worker's slot frees when it expires.
--
-- Returns one row: the slot key taken (NULL: none); whether a slot looked
-- free in this statement's snapshot (a concurrent taker won it: ask again);
-- and the seconds until the group's earliest slot ends (NULL: none held).
WITH free AS (
  SELECT slot.key
  FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS slot (key, n)
  WHERE NOT EXISTS (
    SELECT FROM taskclaim.claim AS held
    WHERE held.key = slot.key
      AND held.expires_at >= statement_timestamp()
      AND held.token <> %(token)s::uuid
  )
  ORDER BY slot.n
  LIMIT 1
), taken AS (
  INSERT INTO taskclaim.claim AS c (key, expires_at, token)
  SELECT
    free.key,
    statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
    %(token)s::uuid
  FROM free
  ON CONFLICT (key) DO UPDATE SET
    expires_at = EXCLUDED.expires_at,
    token = EXCLUDED.token
  WHERE c.expires_at < statement_timestamp() OR c.token = EXCLUDED.token
  RETURNING c.key
)
SELECT
  (SELECT key FROM taken),
  EXISTS (SELECT FROM free),
  (
    SELECT extract(epoch FROM min(held.expires_at) - statement_timestamp())::double precision
    FROM taskclaim.claim AS held
    WHERE held.key = ANY(%(keys)s::text[])
  )
