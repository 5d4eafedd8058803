-- testing.lock_waiters(): backend pids waiting for an advisory lock of this
-- database behind the session holder (a backend pid). The lock key as in
-- lock_holders.sql.
WITH lock AS (
  SELECT coalesce(CAST(%(key)s AS bigint), hashtextextended(%(name)s::text, 0)) AS key
)
SELECT l.pid
FROM pg_locks AS l, lock
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = ((lock.key >> 32) & 4294967295)::oid
  AND l.objid = (lock.key & 4294967295)::oid
  AND l.objsubid = 1
  AND NOT l.granted
  AND %(holder)s::integer = ANY (pg_blocking_pids(l.pid))
ORDER BY l.pid
