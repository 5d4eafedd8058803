-- Seconds until the queue's next message becomes visible: 0 when one is due
-- already, no row when none ever will (the queue is empty or holds only
-- messages parked at 'infinity'). Total over every visible_at: subtracting
-- from 'infinity' fails before PostgreSQL 17, so such rows are left out,
-- and '-infinity' counts as due now. min() reads one index entry.
SELECT extract(epoch FROM greatest(next.at, clock_timestamp()) - clock_timestamp())::float8
FROM (
  SELECT min(visible_at) AS at
  FROM taskclaim.message
  WHERE queue = %(queue)s AND visible_at < 'infinity'
) AS next
WHERE next.at IS NOT NULL
