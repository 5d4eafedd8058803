-- Leases up to `limit` visible messages, highest priority first, then oldest
-- due, skipping rows other consumers are leasing right now; counts the
-- delivery and hides the messages for the visibility timeout. `due` is materialized so it is run
-- (and its rows locked) once, however the planner joins it.
WITH due AS MATERIALIZED (
  SELECT id, priority, visible_at
  FROM taskclaim.message
  WHERE queue = %(queue)s AND visible_at <= statement_timestamp()
  ORDER BY priority DESC, visible_at, id
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED
), leased AS (
  UPDATE taskclaim.message AS m
  SET attempts = m.attempts + 1,
      lease = %(lease)s,
      leased_at = statement_timestamp(),
      visible_at = statement_timestamp() + make_interval(secs => %(visibility)s)
  FROM due
  WHERE m.id = due.id
  RETURNING m.id, m.body, m.attempts
)
SELECT leased.id, leased.body, leased.attempts
FROM leased JOIN due ON due.id = leased.id
ORDER BY due.priority DESC, due.visible_at, due.id
