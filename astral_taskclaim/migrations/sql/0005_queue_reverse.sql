-- Undoes queue/schema.sql: drops every queued message.
DROP TABLE taskclaim.message;
DROP FUNCTION taskclaim.notify_message();
