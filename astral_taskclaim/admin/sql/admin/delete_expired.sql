-- Deletes every expired claim, as taskclaim.delete_expired() does, but as a
-- plain DELETE that the service role (which cannot run the function) may
-- issue from the admin. The statement's own time, like the admin's "expired"
-- filter, so a request inside a long transaction deletes what it showed.
DELETE FROM taskclaim.claim WHERE expires_at < statement_timestamp();
