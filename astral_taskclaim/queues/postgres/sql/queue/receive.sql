-- Leases up to `limit` visible messages, highest priority first, then oldest due, skipping rows
-- other consumers are leasing right now and the ids in `skip` (messages this
-- consumer has quarantined); counts the delivery and hides the messages for
-- the visibility timeout. With `only` set, leases that one message at most.
-- `due` is materialized so it is run (and its rows locked) once, however the
-- planner joins it.
--
-- The update finds its rows by primary key (`= ANY` of the locked ids, one
-- index search): joined to `due`, the planner would often hash-join a
-- sequential scan of the whole table, every row and every dead version of a
-- draining queue, for 100 ids. The statement runs prepared (planned once
-- per connection).
--
-- With `relaxed` (the caller is in autocommit, so this statement is its own
-- transaction) the commit does not wait for the WAL flush
-- (`synchronous_commit` off for this transaction alone). A lease lost in a
-- server crash only makes its messages visible again, uncounted, as if
-- never received: delivery stays at least once. Whatever the consumer
-- commits afterwards (its claims, its settlement) is flushed with the WAL
-- before it, so a settlement never outlives the lease it settles. Inside a
-- caller's transaction the setting would last to the caller's commit, so it
-- is left alone there.
--
-- Total over every value the columns admit: the count stops at the largest
-- integer instead of overflowing (a row at 2147483647 would otherwise fail
-- every receive of the queue), and 'infinity' or '-infinity' in visible_at
-- only orders the row last or first.
WITH due AS MATERIALIZED (
  -- `unsettled`: a lease still set on a visible row ran out unsettled (its
  -- worker died, perhaps at this very message's hands).
  SELECT id, priority, visible_at, lease IS NOT NULL AS unsettled
  FROM taskclaim.message
  WHERE queue = %(queue)s AND visible_at <= statement_timestamp()
    AND id <> ALL (%(skip)s::bigint[])
    AND (%(only)s::bigint IS NULL OR id = %(only)s::bigint)
  ORDER BY priority DESC, visible_at, id
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED
), leased AS (
  UPDATE taskclaim.message AS m
  SET attempts = least(m.attempts, 2147483646) + 1,
      lease = %(lease)s,
      leased_at = statement_timestamp(),
      visible_at = statement_timestamp() + make_interval(secs => %(visibility)s)
  WHERE m.id = ANY (ARRAY(SELECT due.id FROM due))
  RETURNING m.id, m.body, m.attempts
)
SELECT leased.id, leased.body, leased.attempts, due.unsettled
FROM leased JOIN due ON due.id = leased.id
-- An uncorrelated subquery: run once, before any row, leased or not.
WHERE (SELECT NOT %(relaxed)s::boolean OR set_config('synchronous_commit', 'off', true) = 'off')
ORDER BY due.priority DESC, due.visible_at, due.id
