-- testing.lock_holders(): backend pids holding an advisory lock of this
-- database, in shared or exclusive mode. The lock is a bigint key, given
-- directly or as a name hashed with hashtextextended(name, 0). pg_locks
-- splits a bigint key into classid (high 32 bits) and objid (low 32 bits),
-- with objsubid 1; the two-int4 form of the lock functions uses objsubid 2.
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
  AND l.granted
ORDER BY l.pid
