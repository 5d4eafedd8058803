"""LeaseKeeper: extending a batch's leases from a thread, on the in-memory
queue (the PostgreSQL and SQS queues' extensions are in the queue
conformance suite, the worker's use of them in tests/worker/test_loop.py)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence

import pytest

from astral_taskclaim.queues import QueueError
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.messages import ReceivedMessage
from astral_taskclaim.worker.leases import LeaseKeeper, lease_length
from tests.eventkit import EventWaiter


class CountingMemoryQueue(MemoryQueue):
    """A memory queue that counts its extensions; ``extended`` is set by
    each that succeeds."""

    def __init__(self, **options: object) -> None:
        super().__init__("keeper", options={"queue_name": uuid.uuid4().hex, **options})
        self.calls = 0
        self.extended = threading.Event()

    def extend_leases(
        self, messages: Sequence[ReceivedMessage], *, seconds: float
    ) -> list[ReceivedMessage]:
        self.calls += 1
        kept = super().extend_leases(messages, seconds=seconds)
        self.extended.set()
        return kept


class FlakyMemoryQueue(CountingMemoryQueue):
    """Its first extension fails, as an unreachable queue's would."""

    def __init__(self) -> None:
        super().__init__(visibility_timeout=3)

    def extend_leases(
        self, messages: Sequence[ReceivedMessage], *, seconds: float
    ) -> list[ReceivedMessage]:
        if self.calls == 0:
            self.calls += 1
            raise QueueError("queue 'keeper': unreachable")
        return super().extend_leases(messages, seconds=seconds)


def visible_in(queue: MemoryQueue) -> list[float]:
    """Seconds until each message may be received again."""
    store = queue.store
    with store.condition:
        now = store.clock()
        return sorted(entry.visible_at - now for entry in store.entries.values())


def received(queue: MemoryQueue, count: int) -> list[ReceivedMessage]:
    queue.send_many([{"n": n} for n in range(count)])
    messages = queue.receive(max_messages=count).messages
    assert len(messages) == count
    return messages


def test_a_failed_extension_is_logged_and_tried_again() -> None:
    queue = FlakyMemoryQueue()
    messages = received(queue, 2)
    waiter = EventWaiter("worker.lease_extension_failed")
    with waiter as failed, LeaseKeeper(queue, messages, lease_seconds=3) as keeper:
        assert failed.wait(30)
        assert queue.extended.wait(30)
    assert keeper.extensions >= 1
    assert not any(keeper.lost(message) for message in messages)
    assert "unreachable" in failed.records[0].getMessage()
    assert queue.receive(max_messages=2).messages == []  # still leased


def test_a_lease_known_to_have_run_out_is_not_extended() -> None:
    # A stalled worker: by its first beat its lease has run out. It must not
    # take the messages back (SQS may accept an earlier receipt handle).
    queue = MemoryQueue("keeper", options={"queue_name": uuid.uuid4().hex})
    messages = received(queue, 2)
    before = visible_in(queue)
    stalled = LeaseKeeper(queue, messages, lease_seconds=1, leased_at=time.monotonic() - 5)
    with EventWaiter("worker.lease_lost") as lost, stalled as keeper:
        assert lost.wait(30)
    assert all(keeper.lost(message) for message in messages)
    assert keeper.lost_count == 2
    assert keeper.extensions == 0
    assert lost.records[0].lost == 2  # type: ignore[attr-defined]
    assert visible_in(queue) <= before  # untouched


def test_a_queue_that_cannot_extend_gets_no_keeper() -> None:
    queue = CloudflareQueue(
        "cf", options={"account_id": "a" * 32, "queue_id": "b" * 32, "api_token": "t" * 40}
    )
    assert not queue.supports_lease_extension
    assert queue.lease_seconds() is None
    with pytest.raises(ValueError, match="cannot extend leases"):
        LeaseKeeper(queue, [], lease_seconds=30)


def test_lease_length_is_none_when_the_queue_cannot_say() -> None:
    class Unreachable(MemoryQueue):
        def lease_seconds(self) -> float:
            raise QueueError("queue 'keeper': unreachable")

    with EventWaiter("worker.lease_extension_failed") as failed:
        assert lease_length(Unreachable("keeper")) is None
    assert failed.wait(0)
    assert lease_length(MemoryQueue("keeper", options={"visibility_timeout": 7})) == 7


def test_keepers_share_one_thread_and_each_stops_alone() -> None:
    first, second = CountingMemoryQueue(), CountingMemoryQueue()
    keeping_first = LeaseKeeper(first, received(first, 1), lease_seconds=0.3)
    with keeping_first, LeaseKeeper(second, received(second, 2), lease_seconds=0.3) as other:
        assert first.extended.wait(30)
        assert second.extended.wait(30)
        beating = [t for t in threading.enumerate() if t.name.startswith("taskclaim-leases")]
        assert len(beating) == 1
        keeping_first.stop()  # the batch is done: its extensions end here
        calls = first.calls
        second.extended.clear()
        assert second.extended.wait(30)  # the other batch is still kept
        assert first.calls == calls
    assert other.extensions >= 2
