-- A Django Task's trailing trigger merging into its key's pending follow-up
-- run (taskclaim/merge.sql): the follow-up's result row (its id is the
-- follow-up's token) takes the follow-up's task path and arguments in the
-- same statement, so the run that starts it finds them equal ('latest'
-- mode: this trigger's). Returns the follow-up's token, or no row.
WITH merged AS (
  -- include: taskclaim/merge.sql
  --   replacing: RETURNING f.token::text
  --   with: RETURNING f.token, f.task
), synced AS (
  UPDATE taskclaim.task_result AS r
  SET task_path = m.task::jsonb ->> 'taskPath',
    args = m.task::jsonb -> 'args',
    kwargs = m.task::jsonb -> 'kwargs'
  FROM merged AS m
  WHERE r.id = m.token AND r.status = 'READY' AND r.started_at IS NULL
)
SELECT token::text FROM merged
