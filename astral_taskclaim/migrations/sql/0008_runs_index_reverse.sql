-- Undoes tasks/runs_index.sql.
DROP INDEX taskclaim.task_result_retrying_idx;
