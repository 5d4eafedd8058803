-- Ends the leases of retried messages and shows each again after its
-- delay (seconds).
UPDATE taskclaim.message AS m
SET visible_at = statement_timestamp() + make_interval(secs => retried.delay),
    lease = NULL,
    leased_at = NULL
FROM unnest(%(ids)s::bigint[], %(leases)s::uuid[], %(delays)s::float8[])
  AS retried (id, lease, delay)
WHERE m.id = retried.id AND m.lease = retried.lease
