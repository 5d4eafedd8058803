-- Runs of Django Tasks and of claimed tasks (taskclaim.task_result and
-- taskclaim.run) per outcome in each bucket of bucket_seconds back from
-- now, bucket 0 the latest, up to the given number of buckets; empty buckets
-- are absent. "succeeded" and "failed" are runs that finished then (a
-- cancelled run failed); "retried" are failed attempts that were retried,
-- at the time of their error.
--
-- A run with an error in the window has finished since or not finished, so
-- two index scans per table find every row: runs finished in the window (a
-- range of task_result_finished_at_idx, run_finished_at_idx) and runs
-- waiting for a retry (the whole of the small partial task_result_retrying_idx,
-- run_retrying_idx), however many runs are queued.
WITH bounds AS (
  SELECT
    statement_timestamp() AS until,
    statement_timestamp()
      - make_interval(secs => %(bucket_seconds)s::int * %(buckets)s::int) AS since
), touched AS (
  SELECT r.status, r.finished_at, r.errors
  FROM taskclaim.task_result AS r, bounds
  WHERE r.finished_at >= bounds.since
  UNION ALL
  SELECT r.status, r.finished_at, r.errors
  FROM taskclaim.task_result AS r
  WHERE r.finished_at IS NULL AND r.errors <> '[]'::jsonb
  UNION ALL
  SELECT r.status, r.finished_at, r.errors
  FROM taskclaim.run AS r, bounds
  WHERE r.finished_at >= bounds.since
  UNION ALL
  SELECT r.status, r.finished_at, r.errors
  FROM taskclaim.run AS r
  WHERE r.finished_at IS NULL
), events AS (
  SELECT
    touched.finished_at AS at,
    CASE touched.status WHEN 'SUCCESSFUL' THEN 'succeeded' ELSE 'failed' END AS outcome
  FROM touched
  WHERE touched.status IN ('SUCCESSFUL', 'FAILED')
  UNION ALL
  SELECT (e.error ->> 'at')::timestamptz, 'retried'
  FROM touched
  CROSS JOIN LATERAL jsonb_array_elements(touched.errors) AS e (error)
  WHERE e.error ->> 'final' = 'false' AND jsonb_typeof(e.error -> 'at') = 'string'
)
SELECT
  floor(extract(epoch FROM bounds.until - events.at) / %(bucket_seconds)s::int)::int AS bucket,
  events.outcome,
  count(*) AS runs
FROM events, bounds
WHERE events.at >= bounds.since AND events.at <= bounds.until
GROUP BY 1, 2
ORDER BY 1, 2;
