-- Parks a message that cannot be received: never due again ('infinity'),
-- unleased, kept for an operator to inspect, fix and run again or delete.
UPDATE taskclaim.message
SET visible_at = 'infinity', lease = NULL, leased_at = NULL
WHERE id = %(id)s
