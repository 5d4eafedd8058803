-- The newest slot a schedule enqueued, or no row.
SELECT last_slot FROM taskclaim.schedule WHERE name = %(name)s::text
