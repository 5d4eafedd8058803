"""Several claimed tasks on one queue: bodies naming their task, the
default task for a TypeScript producer's body, one task as before."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.models import ClaimedRun
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import registry
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

ran: list[tuple[str, Any]] = []


@pytest.fixture
def mixed() -> Iterator[PostgresQueue]:
    """Queue ``mixed`` (PostgreSQL) in ``TASKCLAIM_QUEUES``, its rows and tasks gone afterwards."""
    ran.clear()
    name = f"mixed-{uuid.uuid4().hex}"
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    config = {"mixed": {"BACKEND": backend, "OPTIONS": {"queue_name": name}}}
    with override_settings(TASKCLAIM_QUEUES=config):
        queue = queues["mixed"]
        assert isinstance(queue, PostgresQueue)
        yield queue
    registry.unregister("mixed")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])
        cursor.execute("DELETE FROM taskclaim.run WHERE queue = 'mixed'")


def texts(queue: PostgresQueue) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body::text FROM taskclaim.message WHERE queue = %s ORDER BY id",
            [queue.queue_name],
        )
        return [row[0] for row in cursor.fetchall()]


def recorder(name: str) -> Any:
    return lambda task: ran.append((name, task))


def drain(queue: PostgresQueue) -> Worker:
    worker = Worker("mixed", backend=queue, burst=True, wait=0, concurrency=2)
    worker.run()
    return worker


def test_one_task_sends_and_reads_the_four_fields_as_before(mixed: PostgresQueue) -> None:
    only = registry.task(queue="mixed", name="tests.only", window_seconds=60)(recorder("only"))
    token = only.enqueue("k1", {"id": 1})
    assert texts(mixed) == [
        f'{{"key":"k1","claim":"{token}","windowSeconds":60,"task":{{"id":1}}}}'
    ]
    # A body naming another task (sent before a deploy took that task off
    # this queue, or after one added it) is not run as the one task: it
    # waits for a worker that has its task, as for an unknown one.
    other = {"key": "k2", "claim": str(uuid.uuid4()), "windowSeconds": 60, "task": 2}
    mixed.send({**other, "taskName": "elsewhere"})
    stats = drain(mixed).stats
    assert (stats.ok, stats.retried, stats.unknown_task) == (1, 1, 1)
    assert ran == [("only", {"id": 1})]
    assert not ClaimedRun.objects.filter(key="k2").exists()  # no attempt made
    [waiting] = texts(mixed)
    assert json.loads(waiting)["taskName"] == "elsewhere"


def test_each_task_gets_its_messages_and_a_typescript_body_the_default(
    mixed: PostgresQueue,
) -> None:
    refresh = registry.task(queue="mixed", name="tests.refresh", window_seconds=60, default=True)(
        recorder("refresh")
    )
    report = registry.task(queue="mixed", name="tests.report", window_seconds=60)(
        recorder("report")
    )
    token = refresh.enqueue("project:1", {"id": 1})
    assert report.enqueue("project:2", {"id": 2}) is not None
    # What a TypeScript producer writes: the four fields, no task name.
    typescript = {"key": "ts:1", "claim": str(uuid.uuid4()), "windowSeconds": 30, "task": [3]}
    mixed.send(typescript)
    sent = texts(mixed)
    assert sent[0] == (
        f'{{"key":"project:1","claim":"{token}","windowSeconds":60,"task":{{"id":1}},'
        '"taskName":"tests.refresh"}'
    )
    assert json.loads(sent[1])["taskName"] == "tests.report"
    assert json.loads(sent[2]) == typescript
    assert drain(mixed).stats.ok == 3
    assert sorted(ran, key=str) == sorted(
        [("refresh", {"id": 1}), ("report", {"id": 2}), ("refresh", [3])], key=str
    )


def test_a_message_naming_an_unknown_task_waits_with_its_claim_held(
    mixed: PostgresQueue,
) -> None:
    registry.task(queue="mixed", name="tests.a", default=True)(recorder("a"))
    registry.task(queue="mixed", name="tests.b")(recorder("b"))
    claim = str(uuid.uuid4())
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.claim (key, token, expires_at) "
            "VALUES ('later:1', %s, now() + interval '1 minute')",
            [claim],
        )
    body = {"key": "later:1", "claim": claim, "windowSeconds": 60, "task": 1, "taskName": "new"}
    mixed.send(body)
    worker = drain(mixed)
    assert (worker.stats.unknown_task, worker.stats.ok, worker.stats.failed) == (1, 0, 0)
    assert ran == []
    assert "later:1" in claims()  # held through the wait
    assert len(texts(mixed)) == 1


def test_keys_are_one_space_unless_a_task_takes_a_namespace(mixed: PostgresQueue) -> None:
    first = registry.task(queue="mixed", name="tests.first", window_seconds=60, default=True)(
        recorder("first")
    )
    shared = registry.task(queue="mixed", name="tests.shared", window_seconds=60)(
        recorder("shared")
    )
    options = {"window_seconds": 60, "key_namespace": "apart"}
    apart = registry.task(queue="mixed", name="tests.apart", **options)(recorder("apart"))
    assert first.enqueue("project:1", 1) is not None
    assert shared.enqueue("project:1", 2) is None  # the key is first's
    assert apart.enqueue("project:1", 3) is not None
    assert set(claims()) == {"project:1", "apart:project:1"}
    drain(mixed)
    assert sorted(ran) == [("apart", 3), ("first", 1)]
