-- Undoes schedule/schema.sql.
DROP TABLE taskclaim.schedule;
