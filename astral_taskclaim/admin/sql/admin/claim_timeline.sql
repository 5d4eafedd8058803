-- Claims expiring in each bucket of bucket_seconds from now, bucket 0
-- first, up to the given number of buckets; empty buckets are absent. A
-- range of claim_expires_at_idx, however large the table.
SELECT
  floor(
    extract(epoch FROM expires_at - statement_timestamp()) / %(bucket_seconds)s::int
  )::int AS bucket,
  count(*) AS claims
FROM taskclaim.claim
WHERE expires_at >= statement_timestamp()
  AND expires_at < statement_timestamp()
                   + make_interval(secs => %(bucket_seconds)s::int * %(buckets)s::int)
GROUP BY 1
ORDER BY 1;
