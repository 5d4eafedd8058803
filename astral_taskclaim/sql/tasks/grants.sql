-- The service role records runs, reads them for get_result(), and deletes
-- old ones (the cleanup command runs as it).
GRANT SELECT, INSERT, UPDATE, DELETE ON taskclaim.task_result TO {service_role};
GRANT EXECUTE ON FUNCTION taskclaim.delete_task_results(interval) TO {service_role};
