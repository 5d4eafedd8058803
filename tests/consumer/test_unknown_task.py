"""A message for a task this worker does not know (a rolling deploy) waits
for a worker that has it, never using up the task's attempts, on every
queue kind; an hour after a worker first found it unknown it is given up,
recorded in the run history."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.core.envelope import WAITING_FIELD
from astral_taskclaim.models import ClaimedRun
from astral_taskclaim.queues import MessageBatch, queues
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.runs import write_runs
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry, registry
from astral_taskclaim.worker.checks import check_unknown_tasks
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims

from ..queues.servers import MotoSQS

pytestmark = pytest.mark.usefixtures("empty_claims")

ran: list[tuple[str, Any]] = []


def recorder(name: str) -> Any:
    return lambda task: ran.append((name, task))


def body(name: object, key: str = "k1", **extra: Any) -> dict[str, Any]:
    """A claimed body naming task ``name``, its claim written."""
    claim = str(uuid.uuid4())
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.claim (key, token, expires_at) "
            "VALUES (%s, %s, now() + interval '1 minute')",
            [key, claim],
        )
    return {"key": key, "claim": claim, "windowSeconds": 60, "task": 1, "taskName": name, **extra}


@pytest.fixture
def shared() -> Iterator[PostgresQueue]:
    """Queue ``shared`` (PostgreSQL) in ``TASKCLAIM_QUEUES``; its rows and
    runs gone afterwards. (A burst worker must not see its own deferral
    come due: :func:`rows` makes the messages due.)"""
    ran.clear()
    name = f"shared-{uuid.uuid4().hex}"
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    config = {"shared": {"BACKEND": backend, "OPTIONS": {"queue_name": name}}}
    with override_settings(TASKCLAIM_QUEUES=config):
        queue = queues["shared"]
        assert isinstance(queue, PostgresQueue)
        yield queue
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])
        cursor.execute("DELETE FROM taskclaim.run WHERE queue = 'shared'")


def tasks(*names: str, queue: str = "shared", default: bool = True) -> list[ClaimedTask[Any]]:
    """Tasks ``names`` of ``queue`` (the first its default), in a registry of their own."""
    registry = TaskRegistry()
    made = [registry.task(queue=queue, name=name, max_retries=1)(recorder(name)) for name in names]
    made[0].default = default
    return made


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if getattr(record, "event", None) == name]


def rows(queue: PostgresQueue) -> list[tuple[dict[str, Any], int]]:
    """The queue's messages now due: (body, attempts)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.message SET visible_at = now() WHERE queue = %s "
            "RETURNING body, attempts",
            [queue.queue_name],
        )
        return [(json.loads(text), attempts) for text, attempts in cursor.fetchall()]


def drain(queue: PostgresQueue, *known: ClaimedTask[Any]) -> Worker:
    """Runs the queue's due messages with a worker that has tasks ``known``."""
    worker = Worker("shared", task=Consumer("shared", known), backend=queue, burst=True, wait=0)
    worker.run()
    return worker


@pytest.mark.django_db(transaction=True)
def test_a_message_for_an_unknown_task_waits_for_a_worker_that_has_it(
    shared: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    old = tasks("app.refresh", "app.report")
    sent = body("app.send_sms")
    shared.send(sent)
    # More deliveries than its attempts (max_retries=1) and the old limit of 3.
    for _ in range(5):
        stats = drain(shared, *old).stats
        assert (stats.retried, stats.unknown_task, stats.failed) == (1, 1, 0)
        [(waiting, attempts)] = rows(shared)
        assert attempts == 0  # a new message: no attempt used
        assert {k: v for k, v in waiting.items() if k != WAITING_FIELD} == sent
        assert sent["key"] in claims()  # held while it waits
    assert ran == []
    assert ClaimedRun.objects.filter(key="k1").count() == 0  # no attempt was made
    found = events(caplog, "queue.task_unknown")
    assert len(found) == 5
    assert "queue 'shared' has no task 'app.send_sms'" in found[0].getMessage()
    assert (found[0].queue, found[0].key) == ("shared", "k1")  # type: ignore[attr-defined]
    first = waiting[WAITING_FIELD]  # kept from the first delivery that found it unknown
    assert abs(first / 1000 - time.time()) < 60

    new = tasks("app.refresh", "app.report", "app.send_sms")  # the deploy reaches this worker
    assert drain(shared, *new).stats.ok == 1
    assert ran == [("app.send_sms", 1)]
    assert rows(shared) == []
    run = ClaimedRun.objects.get(key="k1")
    assert (run.task, run.status, run.attempts) == ("app.send_sms", "SUCCESSFUL", 1)


@pytest.mark.django_db(transaction=True)
def test_it_is_given_up_an_hour_after_a_worker_first_found_it_unknown(
    shared: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    an_hour_ago = round((time.time() - 3600) * 1000)
    shared.send(body("app.send_sms", **{WAITING_FIELD: an_hour_ago}))
    stats = drain(shared, *tasks("app.refresh", "app.report")).stats
    assert (stats.failed, stats.retried) == (1, 0)
    assert rows(shared) == []
    assert "k1" not in claims()  # released
    run = ClaimedRun.objects.get(key="k1")
    assert (run.task, run.status) == ("app.send_sms", "FAILED")
    [error] = run.errors
    assert error["exception_class_path"] == "builtins.LookupError"
    assert error["message"].startswith("queue 'shared' has no task 'app.send_sms'")
    [given_up] = events(caplog, "queue.task_unknown")
    assert given_up.levelname == "ERROR"
    assert "given up (waited 3600 s)" in given_up.getMessage()


@pytest.mark.django_db(transaction=True)
def test_a_name_no_task_can_have_is_given_up_at_once(shared: PostgresQueue) -> None:
    shared.send(body("app.\x00evil"))
    shared.send(body(42, key="k2"))
    assert drain(shared, *tasks("app.refresh", "app.report")).stats.failed == 2
    assert rows(shared) == []
    assert sorted(ClaimedRun.objects.filter(queue="shared").values_list("task", "status")) == [
        ("", "FAILED"),
        ("app.\\x00evil", "FAILED"),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_body_that_cannot_be_sent_again_is_given_up_not_the_worker(
    shared: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    # Within the limit as enqueued, over it with the waiting field; and a
    # lone surrogate (JSON.stringify writes one escaped), which no queue
    # writes: sending either again raised out of the worker, every delivery.
    sent = body("app.send_sms")
    sent["task"] = ""
    room = shared.max_body_bytes - len(shared.encode(sent))
    shared.send({**sent, "task": "a" * room})
    text = json.dumps(body("app.send_sms", key="k2")).replace('"task": 1', '"task": "\\ud800"')
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.message (queue, body) VALUES (%s, %s)", [shared.queue_name, text]
        )
    stats = drain(shared, *tasks("app.refresh", "app.report")).stats
    assert (stats.failed, stats.retried) == (2, 0)
    assert rows(shared) == []
    assert not {"k1", "k2"} & set(claims())  # released
    runs = ClaimedRun.objects.filter(queue="shared").order_by("key")
    assert [(run.key, run.status) for run in runs] == [("k1", "FAILED"), ("k2", "FAILED")]
    why = [record.getMessage() for record in events(caplog, "queue.task_unknown")]
    assert f"over the {shared.max_body_bytes}-byte limit" in why[0]
    assert "not valid Unicode text" in why[1]


@pytest.mark.django_db(transaction=True)
def test_a_typescript_body_goes_to_the_default_and_waits_without_one(
    shared: PostgresQueue,
) -> None:
    typescript = body(None)
    del typescript["taskName"]
    shared.send(typescript)
    stats = drain(shared, *tasks("app.refresh", "app.report", default=False)).stats
    assert stats.unknown_task == 1
    [(waiting, attempts)] = rows(shared)
    assert ("taskName" not in waiting, attempts) == (True, 0)
    assert drain(shared, *tasks("app.refresh", "app.report")).stats.ok == 1
    assert ran == [("app.refresh", 1)]


@pytest.mark.django_db(transaction=True)
def test_check_and_status_name_queued_tasks_no_installed_module_registers(
    shared: PostgresQueue,
) -> None:
    registry.task(queue="shared", name="app.refresh", default=True)(print)
    try:
        typescript = body(None)
        del typescript["taskName"]
        shared.send(typescript)  # the default's
        shared.send(body("app.refresh", key="k2"))
        assert check_unknown_tasks(databases=["default"]) == []
        shared.send(body("app.send_sms", key="k3"))
        shared.send(body("app.send_sms", key="k4"))
        [warning] = check_unknown_tasks(databases=["default"])
        assert warning.id == "astral_taskclaim.W037"
        assert warning.msg.startswith(
            "queue 'shared' holds 2 messages naming 'app.send_sms', a task no installed "
            "module registers for it"
        )
        assert check_unknown_tasks() == []  # only with --database
        out = StringIO()
        call_command("taskclaim_status", "--json", stdout=out)
        found = json.loads(out.getvalue())["unknown_tasks"]
        assert found == {"shared": [{"task": "app.send_sms", "messages": 2}]}
        out = StringIO()
        call_command("taskclaim_status", stdout=out)
        assert (
            "queue shared: 2 messages naming task 'app.send_sms', which no installed module "
            "registers: waiting for a worker that has it"
        ) in out.getvalue()
    finally:
        registry.unregister("shared")


@pytest.mark.django_db(transaction=True)
def test_check_asks_for_a_default_for_messages_naming_no_task(shared: PostgresQueue) -> None:
    # The README's mistake: a queue gains a second task while messages
    # sent when it had one (naming none) are queued; no deploy brings a
    # worker for them, declaring the old task default=True does.
    registry.task(queue="shared", name="app.refresh")(print)
    registry.task(queue="shared", name="app.report")(print)
    try:
        typescript = body(None)
        del typescript["taskName"]
        shared.send(typescript)
        [warning] = check_unknown_tasks(databases=["default"])
        assert warning.msg.startswith(
            "queue 'shared' holds 1 message naming no task, and none of its tasks "
            "(app.refresh, app.report) is declared default=True:"
        )
        assert str(warning.hint).startswith("Declare default=True on the task these messages")
    finally:
        registry.unregister("shared")


KINDS = ["memory", "cloudflare", "sqs"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.django_db(transaction=True)
def test_every_queue_kind_sends_it_again_with_its_delivery_count_afresh(
    kind: str, cloudflare_options: Callable[..., dict[str, Any]], moto_sqs: MotoSQS
) -> None:
    ran.clear()
    if kind == "memory":
        backend = "astral_taskclaim.queues.memory.MemoryQueue"
        options: dict[str, Any] = {"queue_name": uuid.uuid4().hex, "visibility_timeout": 2}
    elif kind == "cloudflare":
        backend = "astral_taskclaim.queues.cloudflare.CloudflareQueue"
        options = cloudflare_options(visibility_timeout=2, poll_interval=0.05)
    else:
        backend = "astral_taskclaim.queues.sqs.SQSQueue"
        options = moto_sqs.options(moto_sqs.create_queue(), visibility_timeout=2)
    config = {"remote": {"BACKEND": backend, "OPTIONS": options}}
    with override_settings(TASKCLAIM_QUEUES=config, TASKCLAIM_DELAY_SCALE=0.001):
        queue = queues["remote"]
        queue.send(body("app.send_sms"))
        try:
            old = Consumer("remote", tasks("app.refresh", "app.report", queue="remote"))
            for _ in range(3):  # past its one retry
                [message] = receive(queue)
                assert message.attempts == 1
                summary = consume(queue, old, message)
                assert (summary.retried, summary.unknown_task) == (1, 1)
            new = tasks("app.refresh", "app.report", "app.send_sms", queue="remote")
            [message] = receive(queue)
            assert (message.attempts, WAITING_FIELD in message.body) == (1, True)
            assert consume(queue, Consumer("remote", new), message).ok == 1
            assert ran == [("app.send_sms", 1)]
        finally:
            queue.close()
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM taskclaim.run WHERE queue = 'remote'")


def receive(queue: BaseQueue) -> list[Any]:
    """The next message, waiting for it (no more than 20 s)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = queue.receive(max_messages=1, wait_seconds=1).messages
        if found:
            return found
    raise AssertionError("no message came in 20 s")


def consume(queue: BaseQueue, known: Consumer, message: Any) -> Any:
    """``message`` run by a worker that has tasks ``known``, settled."""
    summary = known.consumer().consume(MessageBatch("remote", [message]))
    queue.settle([message])
    write_runs("default", [message], queue="remote")
    return summary
