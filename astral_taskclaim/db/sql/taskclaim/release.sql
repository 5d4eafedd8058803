-- release_task(): frees a key, but only while the given token still holds
-- it; a later claim of the key stays.
DELETE FROM taskclaim.claim
WHERE key = %(key)s AND token = %(token)s::uuid
