-- Undoes 0012_schedule_slot.sql.
DROP FUNCTION taskclaim.enqueue_schedule_slot(
  text, double precision, text, text, double precision, text, text, timestamptz
);
