-- The relay's failed sends, one array element per row: one more attempt and
-- its error; dead rows are set aside for good; a row with a delay waits it
-- out (its own backoff), one without keeps its place.
UPDATE taskclaim.outbox AS o SET
  attempts = o.attempts + 1,
  last_error = failed.error,
  dead_at = CASE WHEN failed.dead THEN statement_timestamp() END,
  available_at = CASE
    WHEN failed.delay IS NULL THEN o.available_at
    ELSE statement_timestamp() + make_interval(secs => failed.delay)
  END
FROM unnest(
  %(ids)s::bigint[], %(errors)s::text[], %(dead)s::boolean[], %(delays)s::double precision[]
) AS failed (id, error, dead, delay)
WHERE o.id = failed.id
