-- Django Tasks on the app's queues: run results in `taskclaim.task_result`,
-- and two columns on the PostgreSQL queue's messages.

-- Receive order: higher priority first (Django's -100..100), then due time.
-- The default keeps rows of existing and TypeScript senders at 0.
ALTER TABLE taskclaim.message
  ADD COLUMN priority smallint NOT NULL DEFAULT 0 CHECK (priority BETWEEN -100 AND 100),
  -- The error of the message's latest failed run, written when it is retried.
  ADD COLUMN last_error text;
CREATE INDEX message_queue_priority_idx
  ON taskclaim.message (queue, priority DESC, visible_at, id);

-- One row per enqueued run of a Django Task. The id is the run's claim token.
CREATE TABLE taskclaim.task_result
(
  id                uuid PRIMARY KEY,
  -- The Task's dotted path, backend alias and queue name (Django's terms).
  task_path         text NOT NULL,
  backend           text NOT NULL,
  queue_name        text NOT NULL,
  -- The TASKCLAIM_QUEUES alias carrying the run's message.
  queue             text NOT NULL,
  priority          smallint NOT NULL DEFAULT 0,
  run_after         timestamptz,
  -- The coalescing key the run claimed; NULL for a task that does not coalesce.
  key               text,
  status            text NOT NULL DEFAULT 'READY'
                      CHECK (status IN ('READY', 'RUNNING', 'FAILED', 'SUCCESSFUL')),
  args              jsonb NOT NULL DEFAULT '[]',
  kwargs            jsonb NOT NULL DEFAULT '{}',
  return_value      jsonb,
  -- One object per failed attempt: exception_class_path, traceback, attempt,
  -- at (ISO time) and final (whether the run gave up there).
  errors            jsonb NOT NULL DEFAULT '[]',
  -- The worker of each attempt, in order: Django's attempts are its length.
  worker_ids        jsonb NOT NULL DEFAULT '[]',
  enqueued_at       timestamptz NOT NULL DEFAULT statement_timestamp(),
  started_at        timestamptz,
  last_attempted_at timestamptz,
  finished_at       timestamptz
);
CREATE INDEX task_result_finished_at_idx ON taskclaim.task_result (finished_at);
CREATE INDEX task_result_last_attempted_at_idx ON taskclaim.task_result (last_attempted_at);
CREATE INDEX task_result_key_idx ON taskclaim.task_result (key) WHERE key IS NOT NULL;

COMMENT ON TABLE taskclaim.task_result IS 'Runs of Django Tasks on astral_taskclaim''s queues.';

-- Deletes results finished longer ago than `keep`, and returns how many.
CREATE FUNCTION taskclaim.delete_task_results(keep interval)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
DECLARE
  deleted bigint;
BEGIN
  DELETE FROM taskclaim.task_result WHERE finished_at < statement_timestamp() - keep;
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN deleted;
END;
$$;

COMMENT ON FUNCTION taskclaim.delete_task_results(interval) IS 'Deletes old task results.';
