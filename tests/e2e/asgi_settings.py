"""Settings of the ASGI test site (``tests.e2e.asgi_site``) that uvicorn
serves in the concurrency test: the test settings without middleware, two
PostgreSQL queues (the claimed task's and the Django Tasks backend's: a
queue has one consumer), and the async pool size the test passes in
``TASKCLAIM_E2E_ASYNC_POOL``."""

from __future__ import annotations

import os

from tests.settings import *  # noqa: F403

MIDDLEWARE: list[str] = []
ROOT_URLCONF = "tests.e2e.asgi_site"
TASKCLAIM_QUEUES = {
    "asgi": {
        "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
        "OPTIONS": {"queue_name": "asgi-e2e"},
    },
    "asgi-tasks": {
        "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
        "OPTIONS": {"queue_name": "asgi-tasks-e2e"},
    },
}
TASKCLAIM_ASYNC_POOL = int(os.environ.get("TASKCLAIM_E2E_ASYNC_POOL", "10"))
TASKS = {
    "default": {
        "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
        "OPTIONS": {"queue": "asgi-tasks"},
    }
}
