-- A trailing run whose claim was kept (taskclaim/keep.sql) has ended:
-- its claim ends a window from the run's start (`left`: the seconds of it
-- left), or now if the run outlived its window, only while the run's token
-- holds it and it would end later. On a PostgreSQL queue in this database
-- (`queue`: its name; NULL: another queue), the key's pending follow-up's
-- message waiting past that is made due then, and the queue's consumers
-- are notified on commit when that is now: the follow-up runs as soon as
-- the key frees. Returns the woken message's queue, if any.
WITH ended AS (
  UPDATE taskclaim.claim AS c
  SET expires_at = greatest(
    statement_timestamp(),
    statement_timestamp() + make_interval(secs => %(left)s::double precision)
  )
  WHERE c.key = %(key)s::text
    AND c.token = %(token)s::uuid
    AND c.expires_at > greatest(
      statement_timestamp(),
      statement_timestamp() + make_interval(secs => %(left)s::double precision)
    )
  RETURNING c.key, c.expires_at
), woken AS (
  UPDATE taskclaim.message AS m
  SET visible_at = ended.expires_at
  FROM ended
  JOIN taskclaim.follow_up AS f ON f.key = ended.key AND f.taken_at IS NULL
  WHERE m.queue = %(queue)s::text
    AND m.lease IS NULL
    AND m.visible_at > ended.expires_at
    AND m.body LIKE '%%"followUp"%%'
    AND m.body::json ->> 'key' = ended.key
    AND m.body::json ->> 'claim' = f.token::text
  RETURNING m.queue, m.visible_at <= statement_timestamp() AS due_now
)
SELECT queue, pg_notify('taskclaim.' || queue, '') FROM woken WHERE due_now
