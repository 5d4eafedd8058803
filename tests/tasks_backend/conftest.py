from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from astral_taskclaim.tasks_backend.compat import task_backends
from astral_taskclaim.worker import Worker, WorkerStats

from . import jobs


def _empty() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'default'")
        cursor.execute("DELETE FROM taskclaim.task_result")
        cursor.execute("DELETE FROM taskclaim.claim")


@pytest.fixture(autouse=True)
def _calls(transactional_db: None) -> Iterator[list[Any]]:
    """Each test starts with no recorded task calls, results, claims or
    messages. Committed for real: the worker commits each claim write."""
    jobs.calls.clear()
    _empty()
    yield jobs.calls
    jobs.calls.clear()
    _empty()


@pytest.fixture
def backend() -> Any:
    return task_backends["default"]


def drain(*, batch_size: int = 10, max_messages: int | None = None) -> WorkerStats:
    """Runs the ``default`` queue's due messages in this thread, as
    ``consume_claimed default --burst`` would. ``max_messages=1`` stops after
    one delivery, so a retry that comes due meanwhile waits for the next."""
    worker = Worker("default", batch_size=batch_size, wait=0, burst=True, max_messages=max_messages)
    return worker.run()


def make_due() -> None:
    """Retries and deferred runs become due now (instead of waiting)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE taskclaim.message SET visible_at = statement_timestamp()")


def message_rows() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body, priority, visible_at, last_error, attempts "
            "FROM taskclaim.message WHERE queue = 'default' ORDER BY id"
        )
        return [(json.loads(body), *rest) for body, *rest in cursor.fetchall()]
