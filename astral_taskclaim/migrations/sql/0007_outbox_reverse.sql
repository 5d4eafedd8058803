-- Undoes outbox/schema.sql: drops every message the relay has not sent.
DROP TABLE taskclaim.outbox;
