"""MemoryQueue: the PostgreSQL queue's semantics in one process."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from astral_taskclaim.queues.memory import MemoryQueue, _MemoryStore, _store_for, reset


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def queue(clock: Clock) -> Iterator[MemoryQueue]:
    made = MemoryQueue("mem", options={"queue_name": uuid.uuid4().hex, "visibility_timeout": 30})
    made.store.clock = clock
    yield made
    made.purge()


def test_send_receive_ack(queue: MemoryQueue) -> None:
    envelope = {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": 300, "task": {"id": 1}}
    queue.send(envelope)
    batch = queue.receive(max_messages=10)
    assert batch.queue == "mem"
    [message] = batch.messages
    assert (message.body, message.attempts) == (envelope, 1)
    assert message.body is not envelope  # decoded afresh, like a real queue
    message.ack()
    queue.settle([message])
    assert queue.count() == 0


def test_leases_hide_messages_until_they_run_out(queue: MemoryQueue, clock: Clock) -> None:
    queue.send_many([{"n": 1}, {"n": 2}])
    first = queue.receive(max_messages=1).messages
    assert [m.body for m in first] == [{"n": 1}]
    assert [m.body for m in queue.receive(max_messages=5).messages] == [{"n": 2}]
    assert queue.receive(max_messages=5).messages == []
    clock.now += 29.9
    assert queue.receive(max_messages=5).messages == []
    clock.now += 0.1
    again = queue.receive(max_messages=5).messages
    assert [(m.body, m.attempts) for m in again] == [({"n": 1}, 2), ({"n": 2}, 2)]


def test_retry_is_not_delivered_before_its_delay(queue: MemoryQueue, clock: Clock) -> None:
    queue.send({"n": 1})
    [message] = queue.receive(max_messages=1).messages
    message.retry(delay_seconds=120)
    queue.settle([message])
    clock.now += 119.9
    assert queue.receive(max_messages=1).messages == []
    clock.now += 0.1
    [again] = queue.receive(max_messages=1).messages
    assert again.attempts == 2


def test_send_delay(queue: MemoryQueue, clock: Clock) -> None:
    queue.send({"n": 1}, delay_seconds=10)
    assert queue.receive(max_messages=1).messages == []
    clock.now += 10
    assert len(queue.receive(max_messages=1).messages) == 1


def test_a_stale_settlement_is_skipped(
    queue: MemoryQueue, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    queue.send({"n": 1})
    [late] = queue.receive(max_messages=1).messages
    clock.now += 30
    [current] = queue.receive(max_messages=1).messages
    late.ack()
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        queue.settle([late])
    assert queue.count() == 1
    assert [r.event for r in caplog.records] == ["queue.settle_stale"]  # type: ignore[attr-defined]
    current.ack()
    queue.settle([current])
    assert queue.count() == 0


def test_instances_with_one_name_share_messages_and_reset_forgets_them() -> None:
    name = uuid.uuid4().hex
    MemoryQueue("a", options={"queue_name": name}).send({"n": 1})
    other = MemoryQueue("b", options={"queue_name": name})
    assert [m.body for m in other.receive(max_messages=1).messages] == [{"n": 1}]
    assert isinstance(_store_for(name), _MemoryStore)
    reset()
    assert other.count() == 0


def test_a_waiting_receive_wakes_on_send(queue: MemoryQueue) -> None:
    queue.store.clock = lambda: 0.0  # real waiting, frozen visibility: only a send wakes it
    result: list[Any] = []
    receiver = threading.Thread(
        target=lambda: result.extend(queue.receive(max_messages=1, wait_seconds=60).messages)
    )
    receiver.start()
    while not queue.store.condition._waiters:  # type: ignore[attr-defined]
        pass  # until the receiver waits on the store (it found nothing)
    queue.send({"n": 1})
    receiver.join()
    assert [m.body for m in result] == [{"n": 1}]


def test_concurrent_receivers_get_each_message_once(queue: MemoryQueue) -> None:
    for start in range(0, 500, 100):
        queue.send_many([{"n": n} for n in range(start, start + 100)])
    seen: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        while batch := queue.receive(max_messages=3).messages:
            with lock:
                seen.extend(m.body["n"] for m in batch)

    threads = [threading.Thread(target=consume) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == list(range(500))


def test_not_transactional_and_bodies_are_exact(queue: MemoryQueue) -> None:
    assert queue.transactional is False
    body = json.loads('{"key":"k","claim":"c","windowSeconds":1,"task":null}')
    queue.send(body)
    entry = next(iter(queue.store.entries.values()))
    assert entry.body == '{"key":"k","claim":"c","windowSeconds":1,"task":null}'


@pytest.mark.parametrize(
    ("options", "check_id"),
    [
        ({"visibility_timeout": -1}, "E013"),
        ({"queue_name": 5}, "E013"),
        ({"database": "default"}, "E014"),
    ],
)
def test_check_reports_bad_options(options: dict[str, Any], check_id: str) -> None:
    queue = MemoryQueue("bad", options=options)
    [message] = queue.check()
    assert message.id == f"astral_taskclaim.{check_id}"
    with pytest.raises(Exception, match="TASKCLAIM_QUEUES"):
        queue.send({"n": 1})


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda q: q.send({"n": 1}, delay_seconds=50_000), ValueError),
        (lambda q: q.send({1j}), TypeError),
        (lambda q: q.send_many([{"n": 1}, {1j}]), TypeError),
        (lambda q: q.receive(max_messages=0), ValueError),
        (lambda q: q.receive(max_messages=1, wait_seconds=float("nan")), ValueError),
    ],
)
def test_bad_arguments_send_nothing(queue: MemoryQueue, call: Any, error: type) -> None:
    with pytest.raises(error):
        call(queue)
    assert queue.count() == 0


def test_status_counts_ready_delayed_and_leased(queue: MemoryQueue, clock: Clock) -> None:
    queue.send_many([1, 2])
    queue.send(3, delay_seconds=60)
    queue.receive(max_messages=1)
    found = queue.status()
    assert (found.ready, found.delayed, found.leased) == (1, 1, 1)
    assert found.oldest_age_seconds is None  # not kept
    clock.now += 31  # the lease runs out: the message is ready again
    assert (queue.status().ready, queue.status().leased) == (2, 0)
