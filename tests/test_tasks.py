"""The claimed-task registry, RetryAfter, enqueue and autodiscovery."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.queues import MessageBatch, ReceivedMessage, queues
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.tasks import ClaimedTask, RetryAfter, TaskRegistry, registry
from tests.aiokit import run
from tests.claimkit import claims

MEMORY = {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"}


@pytest.fixture
def tasks() -> TaskRegistry:
    return TaskRegistry()


@pytest.fixture
def memory_queue() -> Iterator[str]:
    """A queue alias ``jobs`` on a fresh in-memory queue."""
    name = uuid.uuid4().hex
    with override_settings(TASKCLAIM_QUEUES={"jobs": {**MEMORY, "OPTIONS": {"queue_name": name}}}):
        yield "jobs"
        queue = queues["jobs"]
        assert isinstance(queue, MemoryQueue)
        queue.purge()


def test_the_decorator_registers_a_task_that_still_runs_directly(tasks: TaskRegistry) -> None:
    seen: list[Any] = []

    @tasks.task(queue="refresh", max_retries=5, window_seconds=60)
    def refresh(task: Any) -> None:
        """Refreshes."""
        seen.append(task)

    assert isinstance(refresh, ClaimedTask)
    assert tasks.get("refresh") is refresh
    assert (refresh.queue, refresh.max_retries, refresh.window_seconds) == ("refresh", 5, 60)
    assert refresh.name.startswith(f"{__name__}.test_the_decorator_registers")
    assert refresh.name.endswith(".<locals>.refresh")
    assert refresh.__doc__ == "Refreshes."
    refresh({"id": 1})
    assert seen == [{"id": 1}]


def test_bare_decorator_uses_the_defaults(tasks: TaskRegistry) -> None:
    @tasks.task
    def work(task: Any) -> None:
        pass

    assert tasks.get("default") is work
    assert (work.max_retries, work.window_seconds) == (3, None)
    assert work.parse({"a": 1}) == {"a": 1}
    assert work.parse(None) is None  # JSON null is unparseable by default


def test_a_queue_may_carry_several_tasks_with_one_default(tasks: TaskRegistry) -> None:
    @tasks.task(queue="q", name="first")
    def first(task: Any) -> None:
        pass

    assert tasks.get("q") is first  # one task: the task itself, as always

    @tasks.task(queue="q", name="second", default=True)
    def second(task: Any) -> None:
        pass

    both = tasks.get("q")
    assert isinstance(both, Consumer)
    assert (both.name, both.default) == ("first, second", second)
    with pytest.raises(ImproperlyConfigured, match="queue 'q' already has a default task, second;"):
        tasks.task(queue="q", name="third", default=True)(print)

    # The same name again (a module imported twice) replaces it.
    @tasks.task(queue="q", name="first")
    def again(task: Any) -> None:
        pass

    assert tasks.tasks_of("q") == [again, second]
    assert len(tasks) == 2
    tasks.unregister("q", "second")
    assert tasks.get("q") is again


class _Runner:
    """A queue's runner, as a Django Tasks backend's is."""

    name = "runner"
    window_seconds = None

    def consumer(self, *, using: str | None = None) -> Any:
        raise AssertionError("not run here")


def test_a_runner_has_its_queue_to_itself(tasks: TaskRegistry) -> None:
    runner = _Runner()
    tasks.set_runners([("r", runner)])
    assert tasks.get("r") is runner
    assert tasks.queues() == {"r"}
    assert list(tasks) == []  # iterating gives the claimed tasks only
    assert "r → runner" in tasks.describe()
    with pytest.raises(ImproperlyConfigured, match="queue 'r': runner cannot share its queue"):
        tasks.task(queue="r", name="first")(print)
    assert tasks.tasks_of("r") == []


def test_runners_are_refused_on_a_claimed_tasks_queue(tasks: TaskRegistry) -> None:
    tasks.set_runners([("r", _Runner())])
    tasks.task(queue="q", name="first")(print)
    with pytest.raises(ImproperlyConfigured, match="queue 'q': runner cannot share its queue"):
        tasks.set_runners([("q", _Runner())])
    # Nothing changed: the earlier runners stay, the task keeps its queue.
    assert tasks.queues() == {"q", "r"}
    tasks.set_runners([])
    assert tasks.queues() == {"q"}


def test_two_runners_on_one_queue_are_refused(tasks: TaskRegistry) -> None:
    first, second = _Runner(), _Runner()
    with pytest.raises(ImproperlyConfigured, match="queue 'r': runner cannot share its queue"):
        tasks.set_runners([("r", first), ("r", second)])
    assert tasks.queues() == set()  # nothing set


def test_an_unknown_queue_lists_the_registered_tasks(tasks: TaskRegistry) -> None:
    with pytest.raises(LookupError, match="no claimed tasks are registered"):
        tasks.get("nope")

    @tasks.task(queue="b", name="tasks.b")
    def b(task: Any) -> None:
        pass

    with pytest.raises(LookupError, match=r"queue 'nope'; registered: b → tasks.b"):
        tasks.get("nope")
    tasks.unregister("b")
    assert list(tasks) == []


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_retries": -1}, ValueError, "max_retries"),
        ({"max_retries": True}, ValueError, "max_retries"),
        ({"max_retries": 1.0}, ValueError, "max_retries"),
        ({"queue": ""}, ValueError, "queue"),
        ({"parse": "json"}, TypeError, "parse"),
        ({"retry_after_ms": 5}, TypeError, "retry_after_ms"),
        ({"window_seconds": math.inf}, ValueError, "window_seconds"),
        ({"window_seconds": -1}, ValueError, "window_seconds"),
        ({"name": ""}, ValueError, "name"),
    ],
)
def test_bad_options_raise_at_decoration(
    tasks: TaskRegistry, options: dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        tasks.task(**options)(lambda task: None)
    assert len(tasks) == 0


def test_a_callable_object_needs_a_name(tasks: TaskRegistry) -> None:
    class Runner:
        def __call__(self, task: Any) -> None:
            pass

    with pytest.raises(TypeError, match="give name="):
        tasks.task(queue="q")(Runner())
    assert tasks.task(queue="q", name="runner")(Runner()).name == "runner"


@pytest.mark.parametrize(
    ("value", "error"),
    [(-1, ValueError), (math.nan, ValueError), ("5", TypeError), (10**400, ValueError)],
)
def test_retry_after_needs_a_finite_wait(value: Any, error: type) -> None:
    with pytest.raises(error, match="retry_after_ms"):
        RetryAfter(value)


def test_retry_after_is_honoured_and_a_custom_mapping_comes_first(tasks: TaskRegistry) -> None:
    class Throttled(Exception):
        pass

    @tasks.task(queue="a", retry_after_ms=lambda e: 7000 if isinstance(e, Throttled) else None)
    def custom(task: Any) -> None:
        pass

    @tasks.task(queue="b")
    def plain(task: Any) -> None:
        pass

    assert custom.retry_after_ms(Throttled()) == 7000
    assert custom.retry_after_ms(RetryAfter(90_000)) == 90_000
    assert plain.retry_after_ms(RetryAfter(1500, "slow down")) == 1500
    assert plain.retry_after_ms(ValueError()) is None
    assert str(RetryAfter(1500, "slow down")) == "slow down"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
def test_enqueue_claims_and_sends_once_per_window(tasks: TaskRegistry, memory_queue: str) -> None:
    @tasks.task(queue=memory_queue, window_seconds=300)
    def job(task: Any) -> None:
        pass

    token = job.enqueue("room:1", {"id": 1})
    assert token is not None
    assert job.enqueue("room:1", {"id": 1}) is None  # coalesced
    assert job.enqueue("room:2", {"id": 2}, window_seconds=5) is not None
    queue = queues[memory_queue]
    bodies = [m.body for m in queue.receive(max_messages=10).messages]
    assert bodies[0] == {"key": "room:1", "claim": token, "windowSeconds": 300, "task": {"id": 1}}
    assert bodies[1]["windowSeconds"] == 5
    assert set(claims()) == {"room:1", "room:2"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
def test_enqueue_without_a_window_says_so(tasks: TaskRegistry, memory_queue: str) -> None:
    @tasks.task(queue=memory_queue)
    def job(task: Any) -> None:
        pass

    with pytest.raises(ValueError, match="needs window_seconds"):
        job.enqueue("k", {})
    with pytest.raises(TypeError, match=r"job\.enqueue\(\) got unexpected keyword 'window'"):
        job.enqueue("k", {}, window=5)  # type: ignore[call-arg]
    assert claims() == {}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
def test_aenqueue_sends_under_the_tasks_window_and_coalesces(
    tasks: TaskRegistry, memory_queue: str
) -> None:
    @tasks.task(queue=memory_queue, window_seconds=300)
    def job(task: Any) -> None:
        pass

    @tasks.task(queue=f"{memory_queue}-none", name="windowless")
    def windowless(task: Any) -> None:
        pass

    async def enqueue() -> list[str | None]:
        with pytest.raises(ValueError, match=r"windowless.aenqueue\(\) needs window_seconds"):
            await windowless.aenqueue("k", {})
        return [await job.aenqueue("room:1", {"id": 1}), await job.aenqueue("room:1", {"id": 2})]

    token, coalesced = run(enqueue())
    assert token is not None
    assert coalesced is None
    bodies = [m.body for m in queues[memory_queue].receive(max_messages=10).messages]
    assert bodies == [{"key": "room:1", "claim": token, "windowSeconds": 300, "task": {"id": 1}}]
    assert claims()["room:1"][0] == token


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
@override_settings(TASKCLAIM_DELAY_SCALE=1.0)
def test_consume_runs_the_task_with_its_options(tasks: TaskRegistry, memory_queue: str) -> None:
    @tasks.task(queue=memory_queue, max_retries=2, parse=lambda t: t if "id" in t else None)
    def job(task: Any) -> None:
        if task["id"] == 2:
            raise RetryAfter(95_500)

    for id_ in (1, 2):
        job.enqueue(f"k{id_}", {"id": id_}, window_seconds=60)
    job.enqueue("k3", {"other": 1}, window_seconds=60)
    batch = queues[memory_queue].receive(max_messages=10)
    summary = job.consume(batch)
    assert (summary.ok, summary.retried, summary.unparseable) == (1, 1, 1)
    assert summary.retry_delays == [96]  # ceil(95.5 s) beats the 30 s backoff
    assert [m.settlement for m in batch.messages] == ["ack", "retry", "ack"]


@pytest.mark.django_db
def test_consume_leaves_malformed_bodies_alone(tasks: TaskRegistry) -> None:
    job = tasks.task(queue="x")(lambda task: None)
    message = ReceivedMessage(body=json.loads('"not an envelope"'), attempts=1, receipt=None)
    summary = job.consume(MessageBatch("x", [message]))
    assert summary.malformed == 1
    assert message.settlement == "ack"


def test_installed_apps_tasks_modules_are_autodiscovered() -> None:
    # tests.e2e.workerapp's tasks module registers queue "e2e" when the app
    # registry (re)loads with it installed.
    registry.unregister("e2e")
    try:
        with override_settings(INSTALLED_APPS=[*_installed(), "tests.e2e.workerapp"]):
            task = registry.get("e2e")
        assert task.name == "tests.e2e.workerapp.tasks.e2e_task"
    finally:
        registry.unregister("e2e")


def _installed() -> list[str]:
    from django.conf import settings

    return list(settings.INSTALLED_APPS)
