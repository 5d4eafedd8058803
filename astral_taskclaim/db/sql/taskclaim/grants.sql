-- The service role reads and writes claims; it cannot delete_expired(),
-- truncate or alter anything.
GRANT USAGE ON SCHEMA taskclaim TO {service_role};
GRANT SELECT, INSERT, UPDATE, DELETE ON taskclaim.claim TO {service_role};
