-- The service role writes outbox rows (enqueue), takes and deletes them, and
-- records failed sends on them (the relay).
GRANT SELECT, INSERT, UPDATE, DELETE ON taskclaim.outbox TO {service_role};
GRANT USAGE ON SEQUENCE taskclaim.outbox_id_seq TO {service_role};
