"""Time limits: where a run's limit comes from (its task, its queue's
``TIME_LIMIT``, a Django Tasks backend's ``time_limit``), how a bad one is
refused, and what a sync run with a limit keeps of its consumer's (the
context it was started in, the rollback of a transaction left open)."""

from __future__ import annotations

import asyncio
import contextvars
import math
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings

from astral_taskclaim import claim_task, signals
from astral_taskclaim.core.checks import check_queue_keys
from astral_taskclaim.core.validation import MAX_SECONDS
from astral_taskclaim.queues import check_queue, create_queue
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.tasks_backend.backend import BackendOptions
from tests.eventkit import EventWaiter
from tests.tasks_backend import jobs
from tests.tasks_backend.running import drain
from tests.testapp.models import Room

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

MEMORY = "astral_taskclaim.queues.memory.MemoryQueue"
BAD_LIMITS = [0, -1, 0.0, math.inf, math.nan, MAX_SECONDS + 1]
WRONG_TYPES = [True, "30", [30]]


def delivery(key: str) -> ReceivedMessage:
    token = claim_task(key, window_seconds=300)
    assert token is not None
    body = {"key": key, "claim": token, "windowSeconds": 300, "task": {"id": 1}}
    return ReceivedMessage(body=body, attempts=1, receipt=None)


def consume(task: ClaimedTask[Any], key: str = "k") -> ReceivedMessage:
    message = delivery(key)
    task.consume(MessageBatch(queue="jobs", messages=[message]))
    return message


@pytest.mark.parametrize("value", BAD_LIMITS)
def test_a_time_limit_out_of_range_is_refused_naming_it(value: float) -> None:
    with pytest.raises(ValueError, match=r"^time_limit must be a number of seconds above 0"):
        TaskRegistry().task(queue="jobs", time_limit=value)(lambda task: None)


@pytest.mark.parametrize("value", WRONG_TYPES)
def test_a_time_limit_of_another_type_is_refused_naming_it(value: object) -> None:
    with pytest.raises(TypeError, match=r"^time_limit must be a number, got"):
        TaskRegistry().task(queue="jobs", time_limit=value)(lambda task: None)  # type: ignore[arg-type]


def test_a_bad_queue_time_limit_is_a_configuration_error_naming_the_entry() -> None:
    queues = {"jobs": {"BACKEND": MEMORY, "TIME_LIMIT": 0}}
    with override_settings(TASKCLAIM_QUEUES=queues):
        with pytest.raises(
            ImproperlyConfigured, match=r"TASKCLAIM_QUEUES\['jobs'\]\['TIME_LIMIT'\]"
        ):
            create_queue("jobs")
        [error] = check_queue("jobs")
        assert error.id == "astral_taskclaim.E010"
        assert "TIME_LIMIT" in str(error.msg)
        task = TaskRegistry().task(queue="jobs")(lambda task: None)
        with pytest.raises(ImproperlyConfigured, match="TIME_LIMIT"):
            consume(task)  # refused before a message is run


def test_time_limit_is_a_known_key_of_a_queue_entry() -> None:
    queues = {"jobs": {"BACKEND": MEMORY, "TIME_LIMIT": 30, "TIME_LIMITS": 30}}
    with override_settings(TASKCLAIM_QUEUES=queues):
        [error] = check_queue_keys()
    assert error.id == "astral_taskclaim.E016"
    assert "'TIME_LIMITS'" in str(error.msg)
    assert "did you mean 'TIME_LIMIT'?" in str(error.msg)


def test_a_bad_backend_time_limit_is_reported_and_a_good_one_reaches_its_runners() -> None:
    read = BackendOptions.read({"time_limit": -5})
    assert read.time_limit is None
    assert read.problems == (
        "OPTIONS['time_limit'] must be a number of seconds above 0 and at most 1e+11, got -5",
    )
    assert BackendOptions.read({"time_limit": 90}).time_limit == 90


class Sleeper:
    """An ``async def`` run that awaits until cancelled; counts its attempts."""

    def __init__(self) -> None:
        self.attempts = 0

    async def __call__(self, task: Any) -> None:
        self.attempts += 1
        await asyncio.Event().wait()


def test_the_queue_time_limit_applies_to_a_task_that_sets_none_and_its_own_wins() -> None:
    queues = {"jobs": {"BACKEND": MEMORY, "TIME_LIMIT": 0.2}}
    with override_settings(TASKCLAIM_QUEUES=queues), EventWaiter("queue.task_timed_out") as seen:
        registry = TaskRegistry()
        sleeper = Sleeper()
        limited = registry.task(queue="jobs", name="tests.sleeper", max_retries=0)(sleeper)
        message = consume(limited)
        [record] = seen.records
        assert record.time_limit == 0.2  # type: ignore[attr-defined]
        assert message.settlement == "ack"
        assert message.run is not None
        assert '"final":true' in (message.run.error or "")

        done = threading.Event()
        own = registry.task(queue="jobs", name="tests.own", time_limit=60)(lambda t: done.set())
        assert consume(own, "k2").run is not None
        assert done.is_set()
        assert len(seen.records) == 1


async def sleeps_for_ever(task: Any) -> None:
    await asyncio.Event().wait()


def test_a_run_past_its_time_limit_is_retried_by_the_usual_rules() -> None:
    registry = TaskRegistry()
    task = registry.task(queue="jobs", max_retries=2, time_limit=0.1)(sleeps_for_ever)
    with EventWaiter("queue.task_retrying") as retrying:
        message = consume(task)
    assert message.settlement == "retry"
    assert message.last_error == (
        "TimeLimitExceeded: the run took longer than its time limit of 0.1 s; cancelled"
    )
    assert len(retrying.records) == 1


seen_context: contextvars.ContextVar[str] = contextvars.ContextVar("seen_context")


def test_a_limited_sync_run_keeps_its_consumers_context_and_rollback() -> None:
    def started(sender: Any, **kwargs: Any) -> None:
        seen_context.set("set by a receiver")

    seen: list[tuple[str, str]] = []

    def run(task: Any) -> None:
        seen.append((seen_context.get("unset"), threading.current_thread().name))
        transaction.set_autocommit(False)
        Room.objects.create(name=f"limited-{uuid.uuid4().hex}")

    signals.task_started.connect(started)
    try:
        task = TaskRegistry().task(queue="jobs", name="tests.ctx", time_limit=30)(run)
        message = consume(task)
    finally:
        signals.task_started.disconnect(started)
    assert seen == [("set by a receiver", "taskclaim-run")]
    assert (message.last_error or "").startswith("TransactionLeftOpen:")
    assert not Room.objects.filter(name__startswith="limited-").exists()


@pytest.fixture
def time_limited_tasks() -> Iterator[None]:
    tasks = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "QUEUES": ["default", "urgent"],
            "OPTIONS": {"queue": "default", "max_retries": 0, "time_limit": 0.2},
        }
    }
    jobs.calls.clear()
    with override_settings(TASKS=tasks):
        yield
    jobs.calls.clear()


@pytest.mark.usefixtures("time_limited_tasks")
def test_a_django_task_past_the_backends_time_limit_fails() -> None:
    result = jobs.sleeps.enqueue(3600)
    stats = drain()
    assert (stats.failed, stats.timed_out) == (1, 1)
    result.refresh()
    assert result.status == "FAILED"
    assert result.errors[-1].exception_class_path.endswith("failures.TimeLimitExceeded")


@pytest.mark.django_db(transaction=False)
def test_in_a_test_transaction_a_sync_run_stays_in_place_an_async_one_is_limited() -> None:
    room = Room.objects.create(name=f"in-test-{uuid.uuid4().hex}")  # seen in this transaction only
    seen: list[tuple[bool, str]] = []

    def run(task: Any) -> None:
        seen.append((Room.objects.filter(pk=room.pk).exists(), threading.current_thread().name))

    registry = TaskRegistry()
    sync = registry.task(queue="jobs", name="tests.sync", time_limit=30)(run)
    assert consume(sync).settlement == "ack"
    assert seen == [(True, threading.current_thread().name)]

    limited = registry.task(queue="jobs", max_retries=0, time_limit=0.1)(sleeps_for_ever)
    with EventWaiter("queue.task_timed_out") as timed_out:
        assert consume(limited, "k2").settlement == "ack"  # given up
    assert len(timed_out.records) == 1
