from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.queues import memory
from astral_taskclaim.tasks_backend.compat import task_backends

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


@pytest.fixture
def memory_backend() -> Iterator[Any]:
    """The default Django Tasks backend on a memory queue; its store."""
    queues = {"mem": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"}}
    tasks = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "QUEUES": ["default", "urgent"],
            "OPTIONS": {"queue": "mem"},
        }
    }
    memory.reset()
    with override_settings(TASKCLAIM_QUEUES=queues, TASKS=tasks):
        yield memory._store_for("mem")
    memory.reset()
