-- Settles a received batch in one statement: deletes the acked messages,
-- shows each retried one again after its delay (seconds), noting the error
-- of its failed run (a message handed back unrun gets its delivery back
-- from attempts: it was not an attempt), and wakes the queue's waiting
-- consumers when a retry is due at once, and records the runs of claimed
-- tasks the messages carried (runs/record.sql; those of messages it settles
-- only). A message is
-- settled only while it is still under the lease it was received with: a
-- settlement that comes after its lease ran out (and the message went to
-- another consumer) changes nothing. Returns how many it settled.
--
-- One statement is one transaction even in autocommit, so a batch settles
-- in a single round trip, and the NOTIFY is sent only if its retries
-- commit.
WITH acked AS (
  DELETE FROM taskclaim.message AS m
  USING unnest(%(ack_ids)s::bigint[], %(ack_leases)s::uuid[]) AS acked (id, lease)
  WHERE m.id = acked.id AND m.lease = acked.lease
  RETURNING m.id
),
retried AS (
  UPDATE taskclaim.message AS m
  SET visible_at = statement_timestamp() + make_interval(secs => retried.delay),
      -- A suspect (its last delivery ran out unsettled) handed back unrun
      -- keeps its lease, so its next receive still sees it as one.
      lease = CASE WHEN retried.suspect THEN m.lease END,
      leased_at = CASE WHEN retried.suspect THEN m.leased_at END,
      last_error = coalesce(retried.error, m.last_error),
      attempts = m.attempts - retried.unrun::int
  FROM unnest(
    %(retry_ids)s::bigint[], %(retry_leases)s::uuid[], %(delays)s::float8[], %(errors)s::text[],
    %(unrun)s::bool[], %(suspect)s::bool[]
  ) AS retried (id, lease, delay, error, unrun, suspect)
  WHERE m.id = retried.id AND m.lease = retried.lease
  RETURNING m.id, retried.delay
),
recorded AS (
  -- include: runs/record.sql
  --   replacing: WHERE true
  --   with: WHERE r.message IN (SELECT id FROM acked UNION ALL SELECT id FROM retried)
),
woken AS (
  SELECT pg_notify(%(channel)s, '')
  FROM (SELECT FROM retried WHERE retried.delay = 0 LIMIT 1) AS due_now
)
SELECT
  (SELECT count(*) FROM acked) + (SELECT count(*) FROM retried) AS settled,
  (SELECT count(*) FROM woken) AS woken
