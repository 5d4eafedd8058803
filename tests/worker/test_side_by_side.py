"""Worker with concurrency above 1: N messages in flight, each kept,
settled and stopped as one at a time would be."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection, connections

from astral_taskclaim import signals
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.summary import MessageConsumer
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.worker.loop import Worker
from astral_taskclaim.worker.protocol import default_batch_size
from tests.eventkit import EventWaiter
from tests.testapp.models import Room

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    made = PostgresQueue("jobs", options={"queue_name": f"side-{uuid.uuid4().hex}"})
    yield made
    made.close()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [made.queue_name])


def make_task(run: Callable[[Any], object]) -> ClaimedTask[Any]:
    return TaskRegistry().task(queue="jobs", name="tests.side")(run)


def send(queue: PostgresQueue, *ids: int) -> None:
    for id_ in ids:
        assert enqueue_claimed(queue, f"job:{id_}", {"id": id_}, window_seconds=300)


def rows(queue: PostgresQueue) -> list[tuple[int, int, bool, bool]]:
    """(task id, attempts, leased, visible now) of each message."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT (body::json->'task'->>'id')::int, attempts, lease IS NOT NULL,
                      visible_at <= clock_timestamp()
               FROM taskclaim.message WHERE queue = %s ORDER BY id""",
            [queue.queue_name],
        )
        return cursor.fetchall()


class Gate:
    """Holds each run until released; says when ``count`` runs are in at once."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.running: set[int] = set()
        self.threads: set[str] = set()
        self.all_in = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, task: Any) -> None:
        with self._lock:
            self.running.add(task["id"])
            self.threads.add(threading.current_thread().name)
            if len(self.running) >= self.count:
                self.all_in.set()
        assert self.release.wait(60)


def in_thread(worker: Worker) -> threading.Thread:
    def run() -> None:
        try:
            worker.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_n_messages_run_at_once_on_n_threads(queue: PostgresQueue) -> None:
    send(queue, *range(1, 9))
    gate = Gate(4)
    worker = Worker("jobs", task=make_task(gate), backend=queue, concurrency=4, burst=True, wait=0)
    thread = in_thread(worker)
    assert gate.all_in.wait(30)
    assert len(gate.threads) == 4
    gate.release.set()
    thread.join(60)
    assert (worker.stats.ok, worker.stats.received, worker.stats.returned) == (8, 8, 0)
    assert rows(queue) == []


def test_default_batch_size_follows_the_concurrency(queue: PostgresQueue) -> None:
    assert [default_batch_size(n) for n in (1, 4, 10, 100)] == [10, 40, 100, 100]
    task = make_task(lambda t: None)
    assert Worker("jobs", task=task, backend=queue, concurrency=10).batch_size == 100
    with pytest.raises(ValueError, match="concurrency must be from 1 or more, got 0"):
        Worker("jobs", task=task, backend=queue, concurrency=0)


def test_two_messages_of_one_key_never_run_at_once(queue: PostgresQueue) -> None:
    # A redelivered duplicate (at least once) sits beside the original.
    body = {"key": "job:1", "claim": str(uuid.uuid4()), "windowSeconds": 60, "task": {"id": 1}}
    queue.send(body)
    queue.send(body)
    send(queue, 2)
    at_once: list[int] = []
    running: set[str] = set()
    lock = threading.Lock()
    second_key = threading.Event()

    def run(task: Any) -> None:
        with lock:
            at_once.append(len(running))
            running.add(threading.current_thread().name)
        if task["id"] == 2:
            second_key.set()
        else:
            assert second_key.wait(30)  # key job:2 runs meanwhile: not held up
        with lock:
            running.discard(threading.current_thread().name)

    task = make_task(run)
    worker = Worker("jobs", task=task, backend=queue, concurrency=3, burst=True, wait=0)
    worker.run()
    assert worker.stats.received == 3
    # The two of job:1 ran one after the other, job:2 beside the first.
    assert sorted(at_once) == [0, 1, 1] or sorted(at_once) == [0, 0, 1]
    assert max(at_once) <= 1


def test_stop_lets_the_running_finish_and_hands_back_the_rest_at_once(
    queue: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    send(queue, *range(1, 11))
    gate = Gate(3)
    worker = Worker("jobs", task=make_task(gate), backend=queue, concurrency=3, batch_size=10)
    with caplog.at_level(logging.INFO, logger="astral_taskclaim"):
        with EventWaiter("worker.handed_back") as handed_back:
            thread = in_thread(worker)
            try:
                assert gate.all_in.wait(30)
                worker.stop()  # the first SIGTERM
                assert handed_back.wait(30)
                # The seven not started are visible again while the three still run.
                state = {id_: (leased, visible) for id_, _, leased, visible in rows(queue)}
                attempts = {id_: count for id_, count, *_ in rows(queue)}
            finally:
                gate.release.set()
                thread.join(60)
        waiting = {i for i, (leased, visible) in state.items() if visible and not leased}
        assert waiting == set(range(1, 11)) - gate.running
        assert all(state[i] == (True, False) for i in gate.running)
        # Handed back unrun: their delivery is no attempt (max_retries=0 would
        # otherwise give them up unrun at their next delivery).
        assert all(attempts[i] == 0 for i in waiting)
    assert (worker.stats.ok, worker.stats.returned) == (3, 7)
    assert sorted(i for i, *_ in rows(queue)) == sorted(set(range(1, 11)) - gate.running)
    assert all(visible and not leased for _, _, leased, visible in rows(queue))


def test_the_leases_of_every_message_in_flight_are_extended(queue: PostgresQueue) -> None:
    send(queue, 1, 2, 3)
    short = PostgresQueue("jobs", options={"queue_name": queue.queue_name, "visibility_timeout": 2})
    rival = PostgresQueue("jobs", options={"queue_name": queue.queue_name, "visibility_timeout": 2})
    gate = Gate(3)
    worker = Worker("jobs", task=make_task(gate), backend=short, concurrency=3, burst=True, wait=0)
    with EventWaiter("worker.lease_lost") as lost:
        thread = in_thread(worker)
        try:
            assert gate.all_in.wait(30)
            # Two leases long, another consumer finds none of the three.
            assert rival.receive(max_messages=3, wait_seconds=4).messages == []
        finally:
            gate.release.set()
            thread.join(60)
    assert lost.records == []
    rival.close()
    assert (worker.stats.ok, worker.stats.leases_lost) == (3, 0)
    assert rows(queue) == []


def test_a_database_error_in_a_lane_hands_the_message_back_and_reconnects(
    queue: PostgresQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    send(queue, 1, 2)
    ran: list[int] = []
    task = make_task(lambda t: ran.append(t["id"]))
    make_consumer, failed = task.consumer, []

    class FailingOnce(MessageConsumer):
        """Message 1's first run meets a dropped connection (as the results
        table's write of a Django Task could)."""

        def __init__(self) -> None:
            self.inner = make_consumer()

        def consume_one(self, message: Any, summary: Any) -> Any:
            if message.body["task"]["id"] == 1 and not failed:
                failed.append(1)
                raise OperationalError("server closed the connection unexpectedly")
            return self.inner.consume_one(message, summary)

    monkeypatch.setattr(task, "consumer", lambda using=None: FailingOnce())
    monkeypatch.setattr("astral_taskclaim.worker.loop.FIRST_BACKOFF", 0.01)
    worker = Worker("jobs", task=task, backend=queue, concurrency=2, max_messages=3, wait=0.1)
    worker.run()
    assert (worker.stats.database_errors, worker.stats.returned) == (1, 1)
    assert sorted(ran) == [1, 2]  # message 1 came back at once and ran
    assert rows(queue) == []


class AsyncGate:
    """:class:`Gate` for ``async def`` runs: holds each on the loop (no
    thread blocked there) until :meth:`open`; each writes a Room first."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.running: set[int] = set()
        self.loops: set[int] = set()
        self.threads: set[str] = set()
        self.connections: list[Any] = []
        self.all_in = threading.Event()
        self._release = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, task: Any) -> None:
        self._loop = asyncio.get_running_loop()
        self.loops.add(id(self._loop))
        self.threads.add(threading.current_thread().name)
        await Room.objects.acreate(name=f"room {task['id']}")
        self.connections.append(await sync_to_async(lambda: connection.connection)())
        self.running.add(task["id"])
        if len(self.running) >= self.count:
            self.all_in.set()
        await asyncio.wait_for(self._release.wait(), 60)

    def open(self) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._release.set)


def test_async_runs_share_one_event_loop_and_write_through_the_orm(queue: PostgresQueue) -> None:
    send(queue, *range(1, 9))
    gate = AsyncGate(4)
    worker = Worker("jobs", task=make_task(gate), backend=queue, concurrency=4, burst=True, wait=0)
    thread = in_thread(worker)
    assert gate.all_in.wait(30)  # four coroutines in flight at once, on one loop
    gate.open()
    thread.join(60)
    assert (worker.stats.ok, worker.stats.received, worker.stats.returned) == (8, 8, 0)
    assert rows(queue) == []
    assert len(gate.loops) == 1
    assert gate.threads == {"taskclaim-event-loop"}
    assert sorted(Room.objects.values_list("name", flat=True)) == [f"room {i}" for i in range(1, 9)]
    # The runs in flight together share the one thread-sensitive connection;
    # each is closed (after a run, as CONN_MAX_AGE=0 says, or as the worker stopped).
    assert len({id(c) for c in gate.connections[:4]}) == 1
    assert all(c.closed for c in gate.connections)
    assert "taskclaim-event-loop" not in {t.name for t in threading.enumerate()}


def test_stop_with_async_runs_in_flight_lets_them_finish(queue: PostgresQueue) -> None:
    send(queue, *range(1, 11))
    gate = AsyncGate(3)
    worker = Worker("jobs", task=make_task(gate), backend=queue, concurrency=3, batch_size=10)
    with EventWaiter("worker.handed_back") as handed_back:
        thread = in_thread(worker)
        try:
            assert gate.all_in.wait(30)
            worker.stop()  # the first SIGTERM
            assert handed_back.wait(30)
        finally:
            gate.open()
            thread.join(60)
    assert (worker.stats.ok, worker.stats.returned) == (3, 7)
    assert sorted(i for i, *_ in rows(queue)) == sorted(set(range(1, 11)) - gate.running)


def test_an_async_run_blocking_the_loop_holds_up_async_runs_only(queue: PostgresQueue) -> None:
    send(queue, 1, 2)
    blocking, done = threading.Event(), threading.Event()

    async def run(task: Any) -> None:
        if task["id"] == 1:
            blocking.set()
            assert done.wait(60)  # blocks the loop, as time.sleep() would
        else:
            done.set()

    def sync_run(task: Any) -> None:
        assert blocking.wait(60)
        done.set()  # a sync run on its lane goes on while the loop is blocked

    sync_queue = PostgresQueue("jobs", options={"queue_name": f"side-{uuid.uuid4().hex}"})
    try:
        assert enqueue_claimed(sync_queue, "sync:1", {"id": 3}, window_seconds=300)
        stuck = Worker(
            "jobs", task=make_task(run), backend=queue, concurrency=2, burst=True, wait=0
        )
        other = Worker(
            "jobs", task=make_task(sync_run), backend=sync_queue, concurrency=2, burst=True, wait=0
        )
        threads = [in_thread(stuck), in_thread(other)]
        for thread in threads:
            thread.join(60)
        assert (stuck.stats.ok, other.stats.ok) == (2, 1)
    finally:
        sync_queue.close()
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM taskclaim.message WHERE queue = %s", [sync_queue.queue_name]
            )


def test_async_failures_go_back_into_their_run_and_are_retried(queue: PostgresQueue) -> None:
    send(queue, 1, 2, 3)
    failures: list[str] = []

    async def run(task: Any) -> None:
        await asyncio.sleep(0)  # suspended at least once: its lane went on meanwhile
        if task["id"] == 2:
            raise SystemExit(3)  # a failed attempt, as in a sync task
        if task["id"] == 3:
            raise ValueError("boom")

    def retried(sender: Any, **kwargs: Any) -> None:
        failures.append(type(kwargs["error"]).__name__)

    signals.task_retried.connect(retried)
    try:
        worker = Worker("jobs", task=make_task(run), backend=queue, concurrency=3, burst=True)
        worker.run()
    finally:
        signals.task_retried.disconnect(retried)
    assert (worker.stats.ok, worker.stats.retried, worker.stats.failed) == (1, 2, 0)
    assert sorted(failures) == ["SystemExit", "ValueError"]
    # Both came back after the first retry's delay, as a sync task's would.
    assert rows(queue) == [(2, 1, False, False), (3, 1, False, False)]
