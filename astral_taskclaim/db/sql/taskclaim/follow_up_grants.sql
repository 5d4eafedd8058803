-- The service role records, takes and supersedes pending follow-up runs.
GRANT SELECT, INSERT, UPDATE, DELETE ON taskclaim.follow_up TO {service_role};
