-- claim_tasks() outside a transaction: claims many distinct keys for a
-- window of seconds in one statement, when none of them has an expired
-- claim to replace. Returns each key it claimed with its fresh token (a key
-- an unexpired claim holds is absent), or, when some key's claim has
-- expired, claims nothing and returns one row of NULLs: the caller then
-- runs claim_many_upsert.sql.
--
-- Most keys of a bulk call are new, and a plain INSERT costs the server a
-- good deal less than ON CONFLICT's speculative insertion of each row. One
-- snapshot read splits the keys: held ones are left alone, absent ones get
-- the plain INSERT. Expired ones need the upsert (its WHERE checked again on
-- the newest row version), and renewing them here, after the inserts, would
-- take rows out of the one bytewise order every bulk claim takes them in,
-- the order that keeps overlapping bulk claims queueing instead of
-- deadlocking; so such a call is left to the upsert whole.
--
-- A key another session inserts after the snapshot makes the plain INSERT
-- fail with unique_violation, all of it rolled back: the caller then runs
-- the upsert too, so this statement is only used where a failed statement
-- costs no more than itself (autocommit). The keys come as one binary array
-- (the b placeholder), sent once for both uses.
WITH present AS MATERIALIZED (
  SELECT c.key, c.expires_at < statement_timestamp() AS expired
  FROM taskclaim.claim AS c
  WHERE c.key = ANY (%(keys)b::text[])
),
renewal AS (
  SELECT EXISTS (SELECT FROM present WHERE present.expired) AS needed
),
fresh AS (
  INSERT INTO taskclaim.claim (key, expires_at, token)
  SELECT
    wanted.key,
    statement_timestamp() + make_interval(secs => %(seconds)s::double precision),
    gen_random_uuid()
  FROM unnest(%(keys)b::text[]) AS wanted (key)
  WHERE NOT (SELECT renewal.needed FROM renewal)
    AND NOT EXISTS (SELECT FROM present WHERE present.key = wanted.key)
  ORDER BY wanted.key COLLATE "C"
  RETURNING key, token
)
SELECT key, token::text FROM fresh
UNION ALL
SELECT NULL, NULL FROM renewal WHERE renewal.needed
