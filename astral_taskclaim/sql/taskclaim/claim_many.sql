-- claim_tasks() outside a transaction: claims many distinct keys for a
-- window of seconds in one statement. Returns each key it claimed with its
-- fresh token; a key an unexpired claim holds is absent.
--
-- Most keys of a bulk call are new, and a plain INSERT costs the server a
-- good deal less than ON CONFLICT's speculative insertion of each row. So
-- the keys are split by one snapshot read: absent keys get a plain INSERT,
-- only expired ones go through the upsert (its WHERE checked again on the
-- newest row version, as in claim.sql), held ones are left alone.
--
-- A key another session inserts after the snapshot makes the plain INSERT
-- fail with unique_violation, all of it rolled back: the caller then runs
-- claim_many_upsert.sql instead, so this statement is only used where a
-- failed statement costs no more than itself (autocommit). Both INSERTs
-- take their rows in bytewise order, as claim_many_upsert.sql does, so
-- overlapping bulk claims queue rather than deadlock. The keys come as one
-- binary array (the b placeholder), sent once for both uses.
WITH present AS MATERIALIZED (
  SELECT c.key, c.expires_at
  FROM taskclaim.claim AS c
  WHERE c.key = ANY (%(keys)b::text[])
),
fresh AS (
  INSERT INTO taskclaim.claim (key, expires_at, token)
  SELECT
    wanted.key,
    CURRENT_TIMESTAMP + make_interval(secs => %(seconds)s::double precision),
    gen_random_uuid()
  FROM unnest(%(keys)b::text[]) AS wanted (key)
  WHERE NOT EXISTS (SELECT FROM present WHERE present.key = wanted.key)
  ORDER BY wanted.key COLLATE "C"
  RETURNING key, token
),
renewed AS (
  INSERT INTO taskclaim.claim AS c (key, expires_at, token)
  SELECT
    present.key,
    CURRENT_TIMESTAMP + make_interval(secs => %(seconds)s::double precision),
    gen_random_uuid()
  FROM present
  WHERE present.expires_at < CURRENT_TIMESTAMP
  ORDER BY present.key COLLATE "C"
  ON CONFLICT (key) DO UPDATE SET
    expires_at = EXCLUDED.expires_at,
    token = EXCLUDED.token
  WHERE c.expires_at < CURRENT_TIMESTAMP
  RETURNING c.key, c.token
)
SELECT key, token::text FROM fresh
UNION ALL
SELECT key, token::text FROM renewed
