-- Undoes taskclaim/schema.sql.
DROP FUNCTION taskclaim.delete_expired();
DROP TABLE taskclaim.claim;
DROP SCHEMA taskclaim;
