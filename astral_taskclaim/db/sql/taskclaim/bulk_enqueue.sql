-- enqueue_claimed_many() on the PostgreSQL queue: claims many distinct keys
-- with the tokens given (in bytewise order, as claim_many_upsert.sql does:
-- claim.sql over the keys), and queues the message of each key it claimed,
-- in the caller's order, in one statement: claims and messages commit
-- together. Returns the keys claimed. The arrays come in binary (the b
-- placeholders): bodies are JSON, full of quotes that text array syntax
-- would have to escape.
WITH item AS (
  SELECT key, token, body, position
  FROM unnest(%(keys)b::text[], %(tokens)b::uuid[], %(bodies)b::text[])
    WITH ORDINALITY AS item (key, token, body, position)
), claimed AS (
  -- include: taskclaim/claim.sql
  --   replacing: %(key)s::text,
  --   with: item.key,
  --   replacing: gen_random_uuid()
  --   with: item.token
  --   replacing: WHERE NOT EXISTS (
  --   with: FROM item WHERE NOT EXISTS (
  --   replacing: held.key = %(key)s::text
  --   with: held.key = item.key
  --   replacing: ON CONFLICT (key)
  --   with: ORDER BY item.key COLLATE "C" ON CONFLICT (key)
  --   replacing: RETURNING token::text
  --   with: RETURNING c.key
), sent AS (
  INSERT INTO taskclaim.message (queue, body)
  SELECT %(queue)s::text, item.body
  FROM item JOIN claimed ON claimed.key = item.key
  ORDER BY item.position
)
SELECT key FROM claimed
