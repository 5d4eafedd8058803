-- Records settled attempts of claimed-task runs (taskclaim.run): one row
-- per run, made by its first settled attempt and updated by the later ones,
-- in one statement for a batch. A run twice in the batch (a duplicate
-- delivery) counts its latest attempt. An attempt older than the row's
-- latest (the late settlement of an earlier delivery) adds its error and
-- worker but leaves status and finish alone.
--
-- The batch comes as one JSON array of objects (`runs`), times in epoch
-- seconds, error and payload JSON text (null: none): one text parameter
-- costs the client one C-encoded json.dumps, where eleven arrays cost
-- psycopg a Python dump per element (about 30 µs per run, measured).
INSERT INTO taskclaim.run AS run
  (id, task, queue, key, status, attempts, errors, worker_ids, payload,
   started_at, last_attempted_at, finished_at)
SELECT DISTINCT ON (r.id)
  r.id, r.task, r.queue, r.key, r.status, r.attempts,
  CASE WHEN r.error IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(r.error::jsonb) END,
  jsonb_build_array(%(worker_id)s::text),
  r.payload,
  to_timestamp(r.started),
  to_timestamp(r.started),
  CASE WHEN r.status <> 'RETRYING' THEN to_timestamp(r.ended) END
FROM json_to_recordset(%(runs)s::json) AS r (
  message bigint, id uuid, task text, queue text, key text, status text, attempts int,
  error text, payload text, started float8, ended float8
)
WHERE true
ORDER BY r.id, r.attempts DESC
ON CONFLICT (id) DO UPDATE SET
  status = CASE WHEN excluded.attempts >= run.attempts THEN excluded.status ELSE run.status END,
  attempts = greatest(run.attempts, excluded.attempts),
  errors = run.errors || excluded.errors,
  worker_ids = run.worker_ids || excluded.worker_ids,
  payload = coalesce(excluded.payload, run.payload),
  started_at = least(run.started_at, excluded.started_at),
  last_attempted_at = greatest(run.last_attempted_at, excluded.last_attempted_at),
  finished_at = CASE
    WHEN excluded.attempts >= run.attempts THEN excluded.finished_at ELSE run.finished_at
  END
