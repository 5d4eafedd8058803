"""Time limits in a worker, on the PostgreSQL queue: a hung ``async def``
run is cancelled and the worker goes on; a hung sync run fails its attempt
at once and the worker, once its other runs settle, stops for a restart.
Either way the other lanes keep running, the hung attempt is retried and
nothing is lost."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.test import override_settings
from prometheus_client import generate_latest

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.dispatch import naming_task
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.worker.loop import Worker
from astral_taskclaim.worker.metrics import worker_registry
from tests.eventkit import EventWaiter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

#: The hung task's limit: short, as nothing else waits on it.
LIMIT = 0.5
#: Longest wait for an event of the worker.
DEADLINE = 60.0
OTHERS = 9


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    made = PostgresQueue("jobs", options={"queue_name": f"limits-{uuid.uuid4().hex}"})
    yield made
    made.close()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [made.queue_name])
        cursor.execute("DELETE FROM taskclaim.run WHERE queue = 'jobs'")


@pytest.fixture(autouse=True)
def fast_retries() -> Iterator[None]:
    with override_settings(TASKCLAIM_DELAY_SCALE=0.001):
        yield


class Others:
    """The other tasks' runs: each waits until all ``count`` run at once
    and the hung run has timed out, so the lanes demonstrably kept running
    beside it and after it."""

    def __init__(self, count: int, timed_out: EventWaiter) -> None:
        self.count = count
        self.timed_out = timed_out
        self.running: set[int] = set()
        self.done: list[int] = []
        self.all_in = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, task: dict[str, int]) -> None:
        with self._lock:
            self.running.add(task["id"])
            if len(self.running) >= self.count:
                self.all_in.set()
        assert self.all_in.wait(DEADLINE)
        assert self.timed_out.wait(DEADLINE)
        with self._lock:
            self.done.append(task["id"])


class Hang:
    """A sync run that blocks on its first attempt until released (the
    test's end), and succeeds on the next."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.attempts = 0

    def __call__(self, task: Any) -> None:
        self.attempts += 1
        if self.attempts == 1:
            self.release.wait(DEADLINE)


class AsyncHang:
    """An ``async def`` run that awaits for ever on its first attempt."""

    def __init__(self) -> None:
        self.attempts = 0
        self.cancelled = threading.Event()

    async def __call__(self, task: Any) -> None:
        self.attempts += 1
        if self.attempts == 1:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise


def tasks(hung: Callable[[Any], object], others: Callable[[Any], object]) -> Consumer:
    """The queue's two tasks: ``hung`` with a time limit, ``others`` without."""
    registry = TaskRegistry()
    hung_task: ClaimedTask[Any] = registry.task(queue="jobs", name="tests.hung", time_limit=LIMIT)(
        hung
    )
    other_task: ClaimedTask[Any] = registry.task(queue="jobs", name="tests.other")(others)
    return Consumer("jobs", [hung_task, other_task])


def send(queue: PostgresQueue, name: str, *ids: int) -> None:
    named = naming_task(queue, name)
    for id_ in ids:
        assert enqueue_claimed(named, f"job:{id_}", {"id": id_}, window_seconds=300)


def left(queue: PostgresQueue) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM taskclaim.message WHERE queue = %s", [queue.queue_name]
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def history(key: str) -> list[tuple[str, int, list[dict[str, Any]]]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT status, attempts, errors FROM taskclaim.run WHERE key = %s", [key])
        return [
            (status, attempts, json.loads(errors) if isinstance(errors, str) else errors)
            for status, attempts, errors in cursor.fetchall()
        ]


def in_thread(worker: Worker) -> threading.Thread:
    def run() -> None:
        try:
            worker.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("concurrency", [10, 1])
def test_a_hung_sync_run_fails_at_once_and_the_worker_stops_for_a_restart(
    queue: PostgresQueue, concurrency: int
) -> None:
    hang = Hang()
    others_count = OTHERS if concurrency > 1 else 2
    with EventWaiter("queue.task_timed_out") as timed_out, EventWaiter("worker.task_hung") as hung:
        others = Others(others_count if concurrency > 1 else 1, timed_out)
        consumer = tasks(hang, others)
        send(queue, "tests.hung", 0)
        send(queue, "tests.other", *range(1, others_count + 1))
        worker = Worker("jobs", task=consumer, backend=queue, concurrency=concurrency, wait=0.2)
        thread = in_thread(worker)
        try:
            # Not burst: the worker stops by itself, once the hung run is failed.
            thread.join(DEADLINE)
            assert not thread.is_alive()
            assert hung.wait(0)
        finally:
            hang.release.set()
            worker.stop()
            thread.join(DEADLINE)
    stats = worker.stats
    assert (stats.timed_out, stats.hung) == (1, 1)
    metrics = generate_latest(worker_registry(worker)[0]).decode()
    assert 'taskclaim_worker_timed_out_messages_total{queue="jobs"} 1.0' in metrics
    assert 'taskclaim_worker_hung_runs_total{queue="jobs"} 1.0' in metrics
    assert stats.retried == 1  # the hung attempt, retried by the usual rules
    if concurrency > 1:
        # The other nine ran side by side, beside the hung run and past its limit.
        assert sorted(others.done) == list(range(1, OTHERS + 1))
    record = timed_out.records[0]
    assert (record.key, record.attempts, record.hung) == ("job:0", 1, True)  # type: ignore[attr-defined]
    assert "self.release.wait(DEADLINE)" in record.getMessage()  # where the thread hangs

    # The next worker (the supervisor's restart) runs the retry and the rest.
    others.all_in.set()
    again = Worker(
        "jobs", task=consumer, backend=queue, concurrency=concurrency, burst=True, wait=1
    )
    again.run()
    assert hang.attempts == 2
    assert left(queue) == 0
    assert sorted(others.done) == list(range(1, others_count + 1))  # 0 lost
    [(status, attempts, errors)] = history("job:0")
    assert (status, attempts) == ("SUCCESSFUL", 2)
    assert errors[0]["exception_class_path"] == (
        "astral_taskclaim.consumer.failures.TimeLimitExceeded"
    )
    assert "time limit of 0.5 s" in errors[0]["message"]


@pytest.mark.parametrize("concurrency", [10, 1])
def test_a_hung_async_run_is_cancelled_and_the_worker_goes_on(
    queue: PostgresQueue, concurrency: int
) -> None:
    hang = AsyncHang()
    others_count = OTHERS if concurrency > 1 else 2
    with EventWaiter("queue.task_timed_out") as timed_out, EventWaiter("worker.task_hung") as hung:
        others = Others(others_count if concurrency > 1 else 1, timed_out)
        consumer = tasks(hang, others)
        send(queue, "tests.hung", 0)
        send(queue, "tests.other", *range(1, others_count + 1))
        worker = Worker(
            "jobs", task=consumer, backend=queue, concurrency=concurrency, burst=True, wait=1
        )
        worker.run()
    assert hang.cancelled.is_set()
    assert not hung.records  # nothing is left running: the worker went on
    stats = worker.stats
    assert (stats.timed_out, stats.hung, stats.retried) == (1, 0, 1)
    assert hang.attempts == 2  # retried in the same run of the worker
    assert stats.ok == others_count + 1
    assert sorted(others.done) == list(range(1, others_count + 1))
    assert left(queue) == 0
    record = timed_out.records[0]
    assert (record.key, record.hung) == ("job:0", False)  # type: ignore[attr-defined]


def test_a_hung_sync_run_stops_every_worker_of_the_process(queue: PostgresQueue) -> None:
    other_queue = PostgresQueue("mail", options={"queue_name": f"limits-{uuid.uuid4().hex}"})
    hang = Hang()
    try:
        with EventWaiter("worker.task_hung") as hung:
            consumer = tasks(hang, lambda task: None)
            send(queue, "tests.hung", 0)
            mail = TaskRegistry().task(queue="mail", name="tests.mail")(lambda task: None)
            hanging = Worker("jobs", task=consumer, backend=queue, wait=0.2)
            idle = Worker("mail", task=mail, backend=other_queue, concurrency=4, wait=0.2)
            threads = [in_thread(hanging), in_thread(idle)]
            for thread in threads:
                thread.join(DEADLINE)
                assert not thread.is_alive()  # both stopped by themselves
        # Told once, by the worker of the hung run's queue.
        assert [record.queue for record in hung.records] == ["jobs"]  # type: ignore[attr-defined]
        assert (hanging.stats.hung, idle.stats.hung) == (1, 0)
    finally:
        hang.release.set()
        other_queue.close()
