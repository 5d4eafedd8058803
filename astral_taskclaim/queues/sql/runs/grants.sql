-- The service role records runs (the workers), reads them (admin, status)
-- and deletes old ones (the cleanup command runs as it).
GRANT SELECT, INSERT, UPDATE, DELETE ON taskclaim.run TO {service_role};
