"""The database layer: everything that talks to PostgreSQL directly.

:mod:`.sqlfiles` reads the packaged SQL files, :mod:`.statements` runs them
on Django's connection (prepared, one round trip), :mod:`.aio_pool` runs them
on async connections (``psycopg_pool``), :mod:`.connections` opens separate psycopg connections
made like Django's, :mod:`.roles` and :mod:`.operations` run the migrations'
SQL with least privilege, and :mod:`.cron` schedules the pg_cron cleanup job.
Nothing here imports from the layers above (claims, queues, tasks, admin).
"""

__all__ = []
