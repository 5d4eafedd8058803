-- Deletes up to `batch_size` expired claims, skipping rows a claim is
-- writing right now, so a batch never waits on (or blocks) a claimer for
-- long. Expiry is checked again on the locked row. The batch is a
-- materialized CTE: as an IN (subquery) the planner may rescan it for each
-- row, and every rescan would skip the rows just deleted and lock more,
-- deleting far more than the batch.
WITH batch AS MATERIALIZED (
  SELECT key FROM taskclaim.claim
  WHERE expires_at < CURRENT_TIMESTAMP
  ORDER BY expires_at
  LIMIT %(batch_size)s
  FOR UPDATE SKIP LOCKED
)
DELETE FROM taskclaim.claim AS c
USING batch
WHERE c.key = batch.key AND c.expires_at < CURRENT_TIMESTAMP
