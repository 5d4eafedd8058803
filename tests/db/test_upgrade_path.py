"""The upgrade path: a database a released version populated migrates to this
version with nothing lost. Its rows are written as that release's schema
stored them (raw SQL, frozen here), never through today's code, so a
migration that reshapes a table must carry them over: the queued claimed
task and Django Task still run, the finished run stays in the history, the
finished Django Task's result stays readable."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim.models import ClaimedRun
from astral_taskclaim.queues import queues
from astral_taskclaim.tasks import registry
from astral_taskclaim.tasks_backend.compat import TaskResultStatus, task_backends
from astral_taskclaim.worker.loop import Worker
from tests.tasks_backend import jobs

pytestmark = pytest.mark.django_db(transaction=True)

#: The last migration the previous version shipped.
RELEASED = "0013_schedule_slot_forward"

QUEUE_NAME = f"upgrade-{uuid.uuid4().hex}"
QUEUES = {
    "default": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"},
    "upgrade": {
        "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
        "OPTIONS": {"queue_name": QUEUE_NAME},
    },
}
RUN_ID = uuid.uuid4()
QUEUED_RESULT = uuid.uuid4()
FINISHED_RESULT = uuid.uuid4()


def execute(sql: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def populate_as_released() -> None:
    """What the released version leaves behind: one claimed task queued with
    its claim held, one finished run, one Django Task queued, one finished."""
    claim = str(uuid.uuid4())
    execute(
        "INSERT INTO taskclaim.claim (key, token, expires_at) "
        "VALUES ('upgrade:1', %s, now() + interval '1 hour')",
        [claim],
    )
    body = {"key": "upgrade:1", "claim": claim, "windowSeconds": 3600}
    execute(
        "INSERT INTO taskclaim.message (queue, body) VALUES (%s, %s)",
        [QUEUE_NAME, json.dumps({**body, "task": {"id": 1}, "taskName": "tests.upgrade"})],
    )
    execute(
        "INSERT INTO taskclaim.run (id, task, queue, key, status, attempts, payload, "
        "started_at, last_attempted_at, finished_at) VALUES "
        "(%s, 'tests.upgrade', 'upgrade', 'upgrade:0', 'SUCCESSFUL', 1, '{\"id\":0}', "
        "now() - interval '1 day', now() - interval '1 day', now() - interval '1 day')",
        [RUN_ID],
    )
    path = "tests.tasks_backend.jobs.add"
    for result, status, value in (
        (QUEUED_RESULT, "READY", None),
        (FINISHED_RESULT, "SUCCESSFUL", "7"),
    ):
        execute(
            "INSERT INTO taskclaim.task_result (id, task_path, backend, queue_name, queue, "
            "status, args, kwargs, return_value, finished_at) VALUES (%s, %s, 'default', "
            "'default', 'default', %s, '[2]', '{\"b\": 3}', %s, "
            "CASE WHEN %s = 'SUCCESSFUL' THEN now() END)",
            [result, path, status, value, status],
        )
    task = {"taskPath": path, "args": [2], "kwargs": {"b": 3}}
    key = f"{path}:{uuid.uuid4()}"
    execute(
        "INSERT INTO taskclaim.message (queue, body) VALUES ('default', %s)",
        [json.dumps({"key": key, "claim": str(QUEUED_RESULT), "windowSeconds": 0, "task": task})],
    )


@pytest.fixture
def released() -> Iterator[list[Any]]:
    """The app migrated back to the release, populated, then forward to
    this version; the rows and tasks gone afterwards (fully migrated)."""
    ran: list[Any] = []
    jobs.calls.clear()
    call_command("migrate", "astral_taskclaim", RELEASED, verbosity=0)
    try:
        populate_as_released()
        call_command("migrate", verbosity=0)
        with override_settings(TASKCLAIM_QUEUES=QUEUES):
            registry.task(queue="upgrade", name="tests.upgrade", window_seconds=3600)(ran.append)
            yield ran
    finally:
        registry.unregister("upgrade")
        call_command("migrate", verbosity=0)
        for table in ("message", "run", "task_result", "claim"):
            execute(f"DELETE FROM taskclaim.{table}", [])
        jobs.calls.clear()


def test_a_populated_release_migrates_and_loses_nothing(released: list[Any]) -> None:
    assert ClaimedRun.objects.get(id=RUN_ID).status == "SUCCESSFUL"
    backend = task_backends["default"]
    assert backend.get_result(str(FINISHED_RESULT)).return_value == 7

    Worker("upgrade", backend=queues["upgrade"], burst=True, wait=0).run()
    Worker("default", burst=True, wait=0).run()

    assert released == [{"id": 1}]
    assert ClaimedRun.objects.filter(key="upgrade:1", status="SUCCESSFUL").count() == 1
    assert jobs.calls == [("add", 2, 3)]
    finished = backend.get_result(str(QUEUED_RESULT))
    assert (finished.status, finished.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
