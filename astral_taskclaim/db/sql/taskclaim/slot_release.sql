-- Frees a run's concurrency slot (`key`), only while the run's token holds
-- it; NULL `key`: frees nothing. On a PostgreSQL queue in this database
-- (`queue`: its name; NULL: another queue), it then wakes the group's
-- oldest waiting message (one sent again for later because the group was
-- at its limit, its body naming the group in "concurrencyGroup") if the
-- slot was freed or another of the group's slots (`keys`) is free: it is
-- made visible now, and the queue's consumers are notified on commit.
-- Run without a key just after a message is sent to wait, it wakes a
-- message a slot freed meanwhile found no one to wake for.
-- Returns the woken message's queue, if any.
WITH freed AS (
  DELETE FROM taskclaim.claim
  WHERE key = %(key)s::text AND token = %(token)s::uuid
  RETURNING key
), waiting AS (
  SELECT m.id
  FROM taskclaim.message AS m
  WHERE m.queue = %(queue)s::text
    AND m.lease IS NULL
    AND m.visible_at > statement_timestamp()
    AND m.body LIKE '%%"concurrencyGroup"%%'
    AND m.body::json ->> 'concurrencyGroup' = %(group)s::text
    AND (
      EXISTS (SELECT FROM freed)
      OR EXISTS (
        SELECT FROM unnest(%(keys)s::text[]) AS slot (key)
        WHERE NOT EXISTS (
          SELECT FROM taskclaim.claim AS held
          WHERE held.key = slot.key AND held.expires_at >= statement_timestamp()
        )
      )
    )
  ORDER BY m.id
  LIMIT 1
  FOR UPDATE SKIP LOCKED
), woken AS (
  UPDATE taskclaim.message AS m
  SET visible_at = statement_timestamp()
  FROM waiting
  WHERE m.id = waiting.id
  RETURNING m.queue
)
SELECT queue, pg_notify('taskclaim.' || queue, '') FROM woken
