"""A PostgreSQL queue ``jobs`` on a fresh queue name, for the commands."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue


@pytest.fixture
def jobs() -> Iterator[PostgresQueue]:
    """``TASKCLAIM_QUEUES = {"jobs": PostgresQueue}``; its rows go afterwards."""
    name = f"command-{uuid.uuid4().hex}"
    config = {
        "jobs": {
            "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
            "OPTIONS": {"queue_name": name},
        }
    }
    with override_settings(TASKCLAIM_QUEUES=config):
        queue = queues["jobs"]
        assert isinstance(queue, PostgresQueue)
        yield queue
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])
