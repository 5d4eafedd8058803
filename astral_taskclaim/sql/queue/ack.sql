-- Deletes acked messages still under the lease they were received with.
DELETE FROM taskclaim.message AS m
USING unnest(%(ids)s::bigint[], %(leases)s::uuid[]) AS acked (id, lease)
WHERE m.id = acked.id AND m.lease = acked.lease
