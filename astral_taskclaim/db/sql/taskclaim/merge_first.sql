-- merge.sql in 'first' mode without debounce: a trigger on a key that a
-- claim holds and whose follow-up is pending is carried by that follow-up
-- as it is. Only reads, taking no transaction id: a hot key stays
-- read-only. Returns the follow-up's token, or no row: then trail.sql.
SELECT f.token::text FROM taskclaim.follow_up AS f
WHERE f.key = %(key)s::text AND f.taken_at IS NULL
  AND EXISTS (
    SELECT FROM taskclaim.claim AS held
    WHERE held.key = %(key)s::text AND held.expires_at >= statement_timestamp()
  )
