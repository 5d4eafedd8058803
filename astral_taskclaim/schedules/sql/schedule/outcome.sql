-- The outcome of a slot whose work ran after its claim committed (a
-- function, or a queue that cannot join the claim's transaction).
UPDATE taskclaim.schedule SET outcome = %(outcome)s::text
WHERE name = %(name)s::text AND last_slot = %(slot)s::timestamptz
