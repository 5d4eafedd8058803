-- Finishes a running run with its return value.
UPDATE taskclaim.task_result
SET status = 'SUCCESSFUL', return_value = %(return_value)s::jsonb,
    finished_at = statement_timestamp()
WHERE id = %(id)s::uuid AND status = 'RUNNING'
RETURNING finished_at
