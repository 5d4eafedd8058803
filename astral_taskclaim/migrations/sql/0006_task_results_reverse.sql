-- Undoes tasks/schema.sql: drops every task result.
DROP FUNCTION taskclaim.delete_task_results(interval);
DROP TABLE taskclaim.task_result;
DROP INDEX taskclaim.message_queue_priority_idx;
ALTER TABLE taskclaim.message DROP COLUMN priority, DROP COLUMN last_error;
