-- Schema `taskclaim`: one claim per task key, so a task queues at most once
-- per window, and the cleanup of expired claims.
CREATE SCHEMA taskclaim;

CREATE TABLE taskclaim.claim
(
  key        text PRIMARY KEY,
  -- When the claim ends; after it, claiming the key replaces the row.
  expires_at timestamptz NOT NULL,
  -- The claiming task's token, which its queue message carries.
  token      uuid NOT NULL
);
CREATE INDEX claim_expires_at_idx ON taskclaim.claim (expires_at);

-- Deletes expired claims and returns how many. Only the owner may run it
-- (and pg_cron's job, scheduled by the migrating user).
CREATE FUNCTION taskclaim.delete_expired()
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
DECLARE
  deleted bigint;
BEGIN
  DELETE FROM taskclaim.claim WHERE expires_at < CURRENT_TIMESTAMP;
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN deleted;
END;
$$;

COMMENT ON FUNCTION taskclaim.delete_expired() IS 'Deletes expired claims.';
REVOKE ALL ON FUNCTION taskclaim.delete_expired() FROM PUBLIC;
