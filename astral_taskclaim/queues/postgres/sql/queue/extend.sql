-- Extends the leases of a batch still being worked on: each message's
-- lease now ends `seconds` from this statement (never earlier than it
-- already did). Only rows still under the lease they were received with
-- are touched, so a consumer whose lease ran out and was taken by another
-- delivery cannot extend (or shorten) the new one. Returns the ids it
-- extended.
UPDATE taskclaim.message AS m
SET visible_at = greatest(m.visible_at, statement_timestamp() + make_interval(secs => %(seconds)s))
FROM unnest(%(ids)s::bigint[], %(leases)s::uuid[]) AS held (id, lease)
WHERE m.id = held.id AND m.lease = held.lease
RETURNING m.id
