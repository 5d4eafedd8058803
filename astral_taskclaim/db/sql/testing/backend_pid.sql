-- testing.backend_pid(): the backend process id of the session.
SELECT pg_backend_pid()
