-- What each schedule's slots did: the newest slot enqueued, when and how.
-- Written by the worker that won a slot's claim (the claim, key
-- "<schedule>@<slot>" in taskclaim.claim, is what makes a slot enqueue
-- once), in the transaction of the claim; read back to find slots missed
-- while every worker was down, and by the admin and taskclaim_status.
CREATE TABLE taskclaim.schedule
(
  name        text PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 1024),
  last_slot   timestamptz NOT NULL,
  enqueued_at timestamptz NOT NULL DEFAULT statement_timestamp(),
  -- enqueued, coalesced (the task key was claimed), ran, failed; started
  -- while work the claim's transaction could not hold is under way.
  outcome     text NOT NULL CHECK (octet_length(outcome) BETWEEN 1 AND 64),
  slots       bigint NOT NULL DEFAULT 1
);

COMMENT ON TABLE taskclaim.schedule IS
  'The last slot each astral_taskclaim schedule enqueued.';
