-- The service role sends, receives and settles messages. LISTEN and NOTIFY
-- need no grant; the trigger function is executable by everyone.
GRANT SELECT, INSERT, UPDATE, DELETE ON taskclaim.message TO {service_role};
GRANT USAGE ON SEQUENCE taskclaim.message_id_seq TO {service_role};
