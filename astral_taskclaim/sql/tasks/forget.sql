-- Deletes the row record.sql wrote, after its message could not be sent.
DELETE FROM taskclaim.task_result WHERE id = %(token)s::uuid AND status = 'READY'
