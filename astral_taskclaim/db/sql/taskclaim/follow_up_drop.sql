-- Drops a pending follow-up whose message could not be sent (a queue
-- outside the claims' database), while it is still the one just created.
DELETE FROM taskclaim.follow_up
WHERE key = %(key)s AND token = %(token)s::uuid AND taken_at IS NULL
