-- Wakes a queue's waiting consumers (a retry due at once).
SELECT pg_notify(%(channel)s, '')
