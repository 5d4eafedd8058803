-- Frees many keys, each only while its given token still holds it (a later
-- claim stays), as release.sql does for one.
DELETE FROM taskclaim.claim AS c
USING unnest(%(keys)s::text[], %(tokens)s::uuid[]) AS released (key, token)
WHERE c.key = released.key AND c.token = released.token
