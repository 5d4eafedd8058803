-- Undoes 0011_schedule.sql.
DROP TABLE taskclaim.schedule;
