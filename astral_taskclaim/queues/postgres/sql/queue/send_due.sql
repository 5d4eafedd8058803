-- One message with a priority (Django's -100..100, received highest first),
-- visible from a time (at once when NULL or past): the queue's write of a
-- Django Task's run, which tasks/enqueue.sql includes so that its claim,
-- message and result row commit in one statement.
INSERT INTO taskclaim.message (queue, body, visible_at, priority)
SELECT
  %(message_queue)s::text,
  %(body)s::text,
  greatest(statement_timestamp(), %(run_after)s::timestamptz),
  %(priority)s::smallint
