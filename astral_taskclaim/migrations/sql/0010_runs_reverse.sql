-- Undoes 0010_runs.sql: drops the claimed-task run history and gives the
-- results' cleanup back its own table only.
CREATE OR REPLACE FUNCTION taskclaim.delete_task_results(keep interval) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
  deleted bigint;
BEGIN
  DELETE FROM taskclaim.task_result WHERE finished_at < statement_timestamp() - keep;
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN deleted;
END;
$$;
DROP TABLE taskclaim.run;
