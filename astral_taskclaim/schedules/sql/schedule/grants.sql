-- The workers record slots; the admin and the status read them.
GRANT SELECT, INSERT, UPDATE ON taskclaim.schedule TO {service_role};
