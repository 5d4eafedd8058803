"""The trailing-run tests' queue: a configured PostgreSQL queue, emptied after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claims.trailingkit import QUEUE


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    config = {QUEUE: {"BACKEND": backend, "OPTIONS": {"queue_name": QUEUE}}}
    with override_settings(TASKCLAIM_QUEUES=config):
        configured = queues[QUEUE]
        assert isinstance(configured, PostgresQueue)
        yield configured
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE])
