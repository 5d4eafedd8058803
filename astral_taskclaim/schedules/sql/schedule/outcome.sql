-- What a slot's enqueue did, once record.sql has recorded the slot: in the
-- same transaction, or after the claim committed (a function, or a queue
-- that cannot join the claim's transaction).
UPDATE taskclaim.schedule SET outcome = %(outcome)s::text
WHERE name = %(name)s::text AND last_slot = %(slot)s::timestamptz
