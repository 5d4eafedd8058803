-- One message, visible after its delay (seconds).
INSERT INTO taskclaim.message (queue, body, visible_at)
VALUES (%(queue)s, %(body)s, statement_timestamp() + make_interval(secs => %(delay)s))
