-- Undoes 0015_follow_up.sql: pending follow-up runs are dropped with it.
DROP TABLE taskclaim.follow_up;
