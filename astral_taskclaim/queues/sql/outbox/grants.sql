-- The service role writes outbox rows (enqueue) and takes and deletes them
-- (the relay).
GRANT SELECT, INSERT, DELETE ON taskclaim.outbox TO {service_role};
GRANT USAGE ON SEQUENCE taskclaim.outbox_id_seq TO {service_role};
