-- Migration 0010: the history of claimed-task runs, one row per run of a
-- @claimed_task (its claim token), written with each settlement of its
-- message (runs/record.sql), kept like the Django Task results and deleted
-- by the same cleanup function, which this migration extends.
CREATE TABLE taskclaim.run
(
  -- The run's claim token: every attempt of one enqueue shares it.
  id                uuid PRIMARY KEY,
  -- The claimed task's name, the TASKCLAIM_QUEUES alias and the claimed key.
  task              text NOT NULL,
  queue             text NOT NULL,
  key               text NOT NULL,
  -- RETRYING: an attempt failed and a retry is due; SUCCESSFUL and FAILED
  -- are final (FAILED: gave up, or the task could not be parsed).
  status            text NOT NULL CHECK (status IN ('RETRYING', 'SUCCESSFUL', 'FAILED')),
  -- Deliveries so far (the latest settled one's count).
  attempts          integer NOT NULL CHECK (attempts >= 0),
  -- One object per failed attempt: exception_class_path, message,
  -- traceback, attempt, at (ISO time) and final (whether the run gave up).
  errors            jsonb NOT NULL DEFAULT '[]',
  -- The worker of each settled attempt, in order.
  worker_ids        jsonb NOT NULL DEFAULT '[]',
  -- The task's JSON text, kept once the run failed, for the admin's retry;
  -- text, so any JSON a message carried (a \u0000 escape too) is kept.
  payload           text,
  started_at        timestamptz NOT NULL,
  last_attempted_at timestamptz NOT NULL,
  finished_at       timestamptz
);
CREATE INDEX run_finished_at_idx ON taskclaim.run (finished_at);
CREATE INDEX run_key_idx ON taskclaim.run (key);
-- The runs waiting for a retry: the overview's chart and the cleanup of
-- runs that never finished read it.
CREATE INDEX run_retrying_idx ON taskclaim.run (last_attempted_at) WHERE finished_at IS NULL;

COMMENT ON TABLE taskclaim.run IS 'Runs of astral_taskclaim''s claimed tasks.';

-- The results' cleanup deletes old claimed-task runs too: finished ones
-- like the results, and runs left unfinished (their message was deleted) a
-- day after that, past any retry delay (12 hours at most).
CREATE OR REPLACE FUNCTION taskclaim.delete_task_results(keep interval) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
  cutoff timestamptz := statement_timestamp() - keep;
  deleted bigint;
  runs bigint;
BEGIN
  DELETE FROM taskclaim.task_result WHERE finished_at < cutoff;
  GET DIAGNOSTICS deleted = ROW_COUNT;
  DELETE FROM taskclaim.run WHERE finished_at < cutoff;
  GET DIAGNOSTICS runs = ROW_COUNT;
  deleted := deleted + runs;
  DELETE FROM taskclaim.run
  WHERE finished_at IS NULL AND last_attempted_at < cutoff - interval '1 day';
  GET DIAGNOSTICS runs = ROW_COUNT;
  RETURN deleted + runs;
END;
$$;
