-- Starts an attempt of a run that has not finished: RUNNING, one more
-- attempt by this worker. No row for a finished (or cancelled, or deleted)
-- run, which is then not run again.
UPDATE taskclaim.task_result
SET status = 'RUNNING',
    worker_ids = worker_ids || jsonb_build_array(%(worker_id)s::text),
    started_at = coalesce(started_at, statement_timestamp()),
    last_attempted_at = statement_timestamp()
WHERE id = %(id)s::uuid AND status IN ('READY', 'RUNNING')
RETURNING status, enqueued_at, started_at, last_attempted_at, worker_ids
