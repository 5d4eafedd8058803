-- One queue's messages by state: ready (receivable now, an expired lease
-- included), delayed (waiting out a send or retry delay), leased (received,
-- not settled, lease running), and the oldest message's age in seconds (of
-- a finite enqueued_at: one written as 'infinity' by hand has no age).
SELECT
  count(*) FILTER (WHERE visible_at <= statement_timestamp()) AS ready,
  count(*) FILTER (WHERE visible_at > statement_timestamp() AND lease IS NULL) AS delayed,
  count(*) FILTER (WHERE visible_at > statement_timestamp() AND lease IS NOT NULL) AS leased,
  EXTRACT(EPOCH FROM statement_timestamp() - min(enqueued_at) FILTER (WHERE isfinite(enqueued_at))
  )::float8 AS oldest_age_seconds
FROM taskclaim.message
WHERE queue = %(queue)s
