-- Deletes up to `batch_size` expired claims, oldest first, skipping rows a
-- claim is writing right now, so a batch never waits on (or blocks) a
-- claimer for long. The batch's rows are locked and collected once, by
-- physical address (an ARRAY(...) subquery runs once, unlike an IN
-- (subquery) the planner may rescan, which would skip the rows just deleted
-- and lock more); expiry is checked again on each locked row.
DELETE FROM taskclaim.claim
WHERE ctid = ANY (ARRAY(
  SELECT ctid FROM taskclaim.claim
  WHERE expires_at < CURRENT_TIMESTAMP
  ORDER BY expires_at
  LIMIT %(batch_size)s
  FOR UPDATE SKIP LOCKED
))
AND expires_at < CURRENT_TIMESTAMP
