-- The runs waiting for a retry (not finished, with an error), for the admin's
-- chart of runs by outcome: few rows, however many runs are queued.
CREATE INDEX task_result_retrying_idx ON taskclaim.task_result (last_attempted_at)
  WHERE finished_at IS NULL AND errors <> '[]'::jsonb;
