"""Per-group concurrency limits (``@claimed_task(concurrency_limit=...)``):
a run holds one of its group's slots; a message that finds them all held
waits, not as an attempt, and a freed slot wakes it on a PostgreSQL queue."""

from __future__ import annotations

import io
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings

from astral_taskclaim import enqueue_claimed
from astral_taskclaim.consumer import concurrency
from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.summary import ConcurrencyLimit, ConsumeSummary
from astral_taskclaim.queues import MessageBatch, queues
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry, registry
from tests.claimkit import claims, insert_claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

QUEUE = "limited"
GROUP = "imports"


def configured(kind: str) -> Iterator[BaseQueue]:
    backend = f"astral_taskclaim.queues.{kind}.{kind.title()}Queue"
    options = {"queue_name": QUEUE} if kind == "postgres" else {}
    with override_settings(TASKCLAIM_QUEUES={QUEUE: {"BACKEND": backend, "OPTIONS": options}}):
        yield queues[QUEUE]
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE])


@pytest.fixture(params=["postgres", "memory"])
def queue(request: pytest.FixtureRequest) -> Iterator[BaseQueue]:
    yield from configured(request.param)


@pytest.fixture
def postgres() -> Iterator[BaseQueue]:
    """The PostgreSQL queue: the one where a freed slot wakes a waiting message."""
    yield from configured("postgres")


def limited(run: Any, limit: int = 1, **options: Any) -> ClaimedTask[Any]:
    return ClaimedTask(
        run, queue=QUEUE, name="import", concurrency_limit=limit, max_retries=2, **options
    )


def slot(index: int, group: str = GROUP) -> str:
    return f"taskclaim-slot:{group}:{index}"


def consume(task: ClaimedTask[Any], queue: BaseQueue) -> ConsumeSummary:
    batch = queue.receive(max_messages=10)
    summary = task.consume(batch)
    queue.settle(batch.messages)
    return summary


def waiting(queue: BaseQueue) -> list[tuple[dict[str, Any], float]]:
    """Bodies left on the PostgreSQL queue and the seconds until each is visible."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT body, extract(epoch FROM visible_at - clock_timestamp())
               FROM taskclaim.message WHERE queue = %s ORDER BY id""",
            [QUEUE],
        )
        return [(json.loads(body), float(wait)) for body, wait in cursor.fetchall()]


@pytest.mark.parametrize(
    ("options", "error", "says"),
    [
        ({"concurrency_limit": 0}, ValueError, "concurrency_limit must be from 1 to 1000, got 0"),
        ({"concurrency_limit": 1001}, ValueError, "from 1 to 1000, got 1001"),
        ({"concurrency_limit": True}, TypeError, "concurrency_limit must be an int, got bool"),
        ({"concurrency_limit": "2"}, TypeError, "concurrency_limit must be an int, got str"),
        ({"concurrency_group": str}, ValueError, "concurrency_group needs concurrency_limit"),
        (
            {"concurrency_limit": 2, "concurrency_group": "tenant"},
            TypeError,
            "concurrency_group must be callable, got str",
        ),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    options: dict[str, Any], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        ClaimedTask(print, name="t", **options)


def test_a_run_holds_the_first_free_slot_of_its_group_and_frees_it(queue: BaseQueue) -> None:
    seen: list[dict[str, tuple[str, float]]] = []
    task = limited(lambda task: seen.append(claims()), limit=3, concurrency_group=lambda t: GROUP)
    insert_claim(slot(0), seconds=30)
    token = enqueue_claimed(queue, "file:1", {"n": 1}, window_seconds=20)
    summary = consume(task, queue)
    assert summary.ok == 1
    [during] = seen
    assert during[slot(1)][0] == token  # slot 0 was held: the first free is 1
    assert 15 < during[slot(1)][1] <= 20  # a window long, at most a minute
    assert slot(1) not in claims()
    assert slot(0) in claims()
    assert concurrency.held_slots([str(token)]) == []


def test_the_default_group_is_the_task(queue: BaseQueue) -> None:
    seen: list[set[str]] = []
    task = limited(lambda task: seen.append(set(claims())))
    enqueue_claimed(queue, "file:1", {"n": 1}, window_seconds=20)
    consume(task, queue)
    assert seen == [{"file:1", "taskclaim-slot:import:0"}]


def test_an_expired_slot_is_free(queue: BaseQueue) -> None:
    ran: list[Any] = []
    task = limited(ran.append, concurrency_group=lambda t: GROUP)
    insert_claim(slot(0), seconds=-1)
    enqueue_claimed(queue, "file:1", {"n": 1}, window_seconds=20)
    assert consume(task, queue).ok == 1
    assert ran == [{"n": 1}]


def test_over_the_limit_a_message_waits_for_the_earliest_slot_not_as_an_attempt(
    queue: BaseQueue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="astral_taskclaim")
    ran: list[Any] = []
    task = limited(ran.append, limit=2, concurrency_group=lambda t: GROUP)
    insert_claim(slot(0), seconds=45)
    insert_claim(slot(1), seconds=30)
    token = enqueue_claimed(queue, "file:1", {"n": 1}, window_seconds=20)
    summary = consume(task, queue)
    assert ran == []
    assert (summary.retried, summary.concurrency_limited, summary.failed) == (1, 1, 0)
    assert 25 < summary.retry_delays[0] <= 30
    [event] = [r for r in caplog.records if getattr(r, "event", "") == "queue.concurrency_limited"]
    assert (event.levelno, event.group) == (logging.DEBUG, GROUP)  # type: ignore[attr-defined]
    # Its claim is held through the wait and a window, so triggers coalesce.
    held, left = claims()["file:1"]
    assert held == token
    assert 45 < left <= 50
    assert enqueue_claimed(queue, "file:1", {"n": 2}, window_seconds=20) is None
    # Sent again for later: nothing is deliverable now.
    assert queue.receive(max_messages=10).messages == []


def test_the_waiting_message_runs_once_a_slot_ends(postgres: BaseQueue) -> None:
    ran: list[Any] = []
    task = limited(ran.append, concurrency_group=lambda t: GROUP)
    insert_claim(slot(0), seconds=30)
    enqueue_claimed(postgres, "file:1", {"n": 1}, window_seconds=20)
    consume(task, postgres)
    [(body, wait)] = waiting(postgres)
    assert body["concurrencyGroup"] == GROUP
    assert 25 < wait <= 30
    with connection.cursor() as cursor:
        cursor.execute("UPDATE taskclaim.claim SET expires_at = now() WHERE key = %s", [slot(0)])
        cursor.execute("UPDATE taskclaim.message SET visible_at = now() WHERE queue = %s", [QUEUE])
    [message] = postgres.receive(max_messages=10).messages
    assert message.attempts == 1
    summary = task.consume(MessageBatch(QUEUE, [message]))
    postgres.settle([message])
    assert (summary.ok, ran) == (1, [{"n": 1}])


def test_a_freed_slot_wakes_the_groups_oldest_waiting_message(postgres: BaseQueue) -> None:
    task = limited(print, concurrency_group=lambda t: t["group"])
    holder = insert_claim(slot(0), seconds=30)
    insert_claim(slot(0, "other"), seconds=30)
    enqueue_claimed(postgres, "other:1", {"group": "other"}, window_seconds=20)
    enqueue_claimed(postgres, "file:1", {"group": GROUP}, window_seconds=20)
    enqueue_claimed(postgres, "file:2", {"group": GROUP}, window_seconds=20)
    assert consume(task, postgres).concurrency_limited == 3
    freed = concurrency._Slot(slot(0), holder, GROUP, [slot(0)])
    concurrency._free("default", QUEUE, freed)
    assert slot(0) not in claims()
    woken = [body["key"] for body, wait in waiting(postgres) if wait <= 0]
    assert woken == ["file:1"]  # one slot freed: one message woken, of that group
    # Freed again (its token holds it no more), nothing more is woken.
    insert_claim(slot(0), seconds=30)
    concurrency._free("default", QUEUE, freed)
    assert [body["key"] for body, wait in waiting(postgres) if wait <= 0] == ["file:1"]


def test_a_slot_freed_while_a_message_was_sent_to_wait_still_wakes_one(
    postgres: BaseQueue,
) -> None:
    task = limited(print, concurrency_group=lambda t: GROUP)
    insert_claim(slot(0), seconds=30)
    enqueue_claimed(postgres, "file:1", {"n": 1}, window_seconds=20)
    assert consume(task, postgres).concurrency_limited == 1
    [(_, wait)] = waiting(postgres)
    assert wait > 25  # the slot is held: nothing woken after the send
    # The slot ends between the take and the send: its release found no one.
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.claim WHERE key = %s", [slot(0)])
    concurrency._free(
        "default", QUEUE, concurrency._Slot(None, str(uuid.uuid4()), GROUP, [slot(0)])
    )
    [(_, wait)] = waiting(postgres)
    assert wait <= 0


def test_groups_are_limited_apart(queue: BaseQueue) -> None:
    ran: list[Any] = []
    task = limited(ran.append, concurrency_group=lambda t: t["tenant"])
    insert_claim(slot(0, "tenant-a"), seconds=30)
    enqueue_claimed(queue, "a:1", {"tenant": "tenant-a"}, window_seconds=20)
    enqueue_claimed(queue, "b:1", {"tenant": "tenant-b"}, window_seconds=20)
    summary = consume(task, queue)
    assert ran == [{"tenant": "tenant-b"}]
    assert (summary.ok, summary.concurrency_limited) == (1, 1)


def test_a_failed_run_frees_its_slot(queue: BaseQueue) -> None:
    def fail(task: Any) -> None:
        raise RuntimeError("boom")

    task = limited(fail)
    enqueue_claimed(queue, "file:1", {"n": 1}, window_seconds=20)
    assert consume(task, queue).retried == 1
    assert not any(key.startswith("taskclaim-slot:") for key in claims())


@pytest.mark.parametrize(
    "group", [lambda t: t["missing"], lambda t: 42, lambda t: "", lambda t: "a\x00b"]
)
def test_a_group_that_cannot_be_told_is_unparseable(queue: BaseQueue, group: Any) -> None:
    ran: list[Any] = []
    task = limited(ran.append, concurrency_group=group)
    enqueue_claimed(queue, "file:1", {"n": 1}, window_seconds=20)
    summary = consume(task, queue)
    assert (ran, summary.unparseable) == ([], 1)
    assert claims() == {}  # claim released, no slot taken


def test_the_decorator_takes_the_options_and_the_run_gets_them() -> None:
    def tenant(task: Any) -> str:
        return str(task["tenant"])

    task = TaskRegistry().task(queue=QUEUE, concurrency_limit=3, concurrency_group=tenant)(print)
    assert task.concurrency == ConcurrencyLimit(3, tenant)
    assert task.prepare(Consumer(QUEUE, [task])).concurrency == ConcurrencyLimit(3, tenant)
    assert TaskRegistry().task(queue=QUEUE)(print).concurrency is None


def test_a_sync_run_left_running_past_its_time_limit_keeps_its_slot(queue: BaseQueue) -> None:
    done = threading.Event()
    task = limited(lambda t: done.wait(30), time_limit=0.2)
    enqueue_claimed(queue, "file:1", {"n": 1}, window_seconds=20)
    try:
        summary = consume(task, queue)
        assert (summary.retried, summary.timed_out) == (1, 1)
        # The run goes on on its thread: its slot is not given to another.
        assert "taskclaim-slot:import:0" in claims()
        assert concurrency.held_slots([claims()["file:1"][0]]) == []  # left to run out
    finally:
        done.set()


@pytest.mark.parametrize(
    ("group", "problem"),
    [
        (lambda t: t["missing"], "KeyError"),
        (lambda t: 42, "returned int"),
        (lambda t: "", "returned an empty str"),
        (lambda t: "a\x00b", "NUL"),
    ],
)
def test_a_group_that_cannot_be_told_is_refused_at_enqueue(
    postgres: BaseQueue, group: Any, problem: str
) -> None:
    task = limited(print, concurrency_group=group, window_seconds=20)
    with pytest.raises(ValueError, match="import") as refused:
        task.enqueue("file:1", {"n": 1})
    assert problem in str(refused.value)
    with pytest.raises(ValueError, match="import"):
        async_to_sync(task.aenqueue)("file:1", {"n": 1})
    registry.register(task)
    try:
        with pytest.raises(CommandError, match="import"):
            call_command("enqueue_claimed", QUEUE, "file:1", "--task", "{}", stdout=io.StringIO())
    finally:
        registry.unregister(QUEUE)
    assert (claims(), waiting(postgres)) == ({}, [])  # nothing written


def test_a_task_that_does_not_parse_is_left_to_its_run(postgres: BaseQueue) -> None:
    task = limited(print, concurrency_group=lambda t: t["tenant"], parse=lambda t: None)
    assert task.enqueue("file:1", {"n": 1}, window_seconds=20)  # the run reports it unparseable
