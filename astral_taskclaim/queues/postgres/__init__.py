"""The embedded PostgreSQL queue, the default backend, as one unit.

:class:`PostgresQueue` (in :mod:`.queue`) keeps messages in
``taskclaim.message`` beside the claims, so a claim and its message are
written in one transaction. The table's SQL (schema, grants, send, receive,
settle) ships in ``sql/queue`` here, and migration ``0005_queue`` creates it.
Configured as ``astral_taskclaim.queues.postgres.PostgresQueue``.
"""

from __future__ import annotations

from astral_taskclaim.queues.postgres.queue import PostgresQueue

__all__ = ["PostgresQueue"]
