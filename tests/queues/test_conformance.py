"""One suite every queue backend passes: PostgreSQL, in-memory, Cloudflare
(the local server) and SQS (moto over HTTP).

Timing: leases and delays are a couple of seconds; a test never sleeps, it
receives (long-polling where the backend can) until the expected message
arrives, and only asserts lower bounds on elapsed time.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from astral_taskclaim.queues.base import BaseQueue, QueueError
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.messages import MAX_DELAY_SECONDS, ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.sqs import SQSQueue

from .servers import MotoSQS

# What a TypeScript producer's JSON.stringify sends: the byte-level contract.
TS_ENVELOPES = [
    '{"key":"project:42","claim":"6f1c2a4e-8d3b-4f7a-9c21-5e0b7d9a3f10",'
    '"windowSeconds":300,"task":{"id":42}}',
    '{"key":"room:café ☕","claim":"0C0FFEE0-AAAA-4BBB-8CCC-DDDDDDDDDDDD",'
    '"windowSeconds":0.5,"task":{"name":"Zoë","tags":["a","b"],"n":null}}',
]
LEASE_SECONDS = 2
DELAY_SECONDS = 2
# Clocks of the test, the database and the servers agree to well within this.
CLOCK_SLACK = 0.2
KINDS = ["postgres", "memory", "cloudflare", "sqs"]


def _param(*kinds: str) -> Any:
    # The PostgreSQL queue commits, like the workers that use it.
    marks = [pytest.mark.django_db(transaction=True)] if "postgres" in kinds else []
    return pytest.param(*kinds, marks=marks, id="-".join(kinds))


@pytest.fixture
def make_queue(
    cloudflare_options: Callable[..., dict[str, Any]], moto_sqs: MotoSQS
) -> Iterator[Callable[[str], BaseQueue]]:
    """A fresh, empty queue of a kind, with ``LEASE_SECONDS`` leases."""
    made: list[BaseQueue] = []

    def make(kind: str) -> BaseQueue:
        alias = f"conformance-{kind}"
        queue: BaseQueue
        if kind == "postgres":
            name = f"conformance-{uuid.uuid4().hex}"
            options = {"queue_name": name, "visibility_timeout": LEASE_SECONDS}
            queue = PostgresQueue(alias, options=options)
        elif kind == "memory":
            options = {"queue_name": uuid.uuid4().hex, "visibility_timeout": LEASE_SECONDS}
            queue = MemoryQueue(alias, options=options)
        elif kind == "cloudflare":
            options = cloudflare_options(visibility_timeout=LEASE_SECONDS, poll_interval=0.05)
            queue = CloudflareQueue(alias, options=options)
        else:
            url = moto_sqs.create_queue()
            queue = SQSQueue(alias, options=moto_sqs.options(url, visibility_timeout=LEASE_SECONDS))
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()


@pytest.fixture(params=[_param(kind) for kind in KINDS])
def queue(request: pytest.FixtureRequest, make_queue: Callable[[str], BaseQueue]) -> BaseQueue:
    return make_queue(request.param)


def drain(queue: BaseQueue, expect: int, *, timeout: float = 20) -> list[ReceivedMessage]:
    """Receives until ``expect`` messages came; fails after ``timeout`` s."""
    received: list[ReceivedMessage] = []
    deadline = time.monotonic() + timeout
    while len(received) < expect:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{len(received)} of {expect} messages arrived in {timeout} s"
        batch = queue.receive(max_messages=queue.max_batch_size, wait_seconds=min(remaining, 1))
        assert batch.queue == queue.alias
        assert len(batch.messages) <= queue.max_batch_size
        received.extend(batch.messages)
    return received


def assert_empty(queue: BaseQueue) -> None:
    """Nothing is visible now (a one-second long poll where there is one)."""
    assert queue.receive(max_messages=queue.max_batch_size, wait_seconds=1).messages == []


def test_capabilities_are_declared(queue: BaseQueue) -> None:
    assert 1 <= queue.max_batch_size <= 100
    assert queue.max_delay_seconds == MAX_DELAY_SECONDS
    assert queue.max_body_bytes >= 127_900  # Cloudflare's 128,000 bytes less its metadata
    assert repr(queue) == f"<{type(queue).__name__} {queue.alias!r}>"  # no options shown


def test_send_receive_and_ack(queue: BaseQueue) -> None:
    queue.send({"n": 1, "text": "héllo"})
    [message] = drain(queue, 1)
    assert message.body == {"n": 1, "text": "héllo"}
    assert message.attempts == 1
    message.ack()
    queue.settle([message])
    assert_empty(queue)


def test_a_leased_message_is_not_delivered_twice(queue: BaseQueue) -> None:
    queue.send({"n": 1})
    drain(queue, 1)
    assert queue.receive(max_messages=queue.max_batch_size).messages == []


def test_unsettled_message_is_redelivered_after_its_lease_with_more_attempts(
    queue: BaseQueue,
) -> None:
    queue.send_many([{"n": 1}, {"n": 2}])
    first = {message.body["n"]: message for message in drain(queue, 2)}
    first[1].ack()
    queue.settle(list(first.values()))  # n=2 stays unsettled: its lease runs out
    [again] = drain(queue, 1)
    assert again.body == {"n": 2}
    assert again.attempts == 2
    assert again.id == first[2].id
    again.ack()
    queue.settle([again])
    # n=1's lease ended with n=2's: had the ack been lost, it would be back by now.
    assert_empty(queue)


def test_retry_is_not_delivered_before_its_delay(queue: BaseQueue) -> None:
    queue.send({"n": 1})
    [message] = drain(queue, 1)
    message.retry(delay_seconds=DELAY_SECONDS)
    retried_at = time.monotonic()
    queue.settle([message])
    assert queue.receive(max_messages=queue.max_batch_size).messages == []
    [again] = drain(queue, 1)
    assert time.monotonic() - retried_at >= DELAY_SECONDS - CLOCK_SLACK
    assert again.body == {"n": 1}
    assert again.attempts == 2


def test_send_delay_is_honoured(queue: BaseQueue) -> None:
    sent_at = time.monotonic()
    queue.send({"n": 1}, delay_seconds=DELAY_SECONDS)
    assert queue.receive(max_messages=queue.max_batch_size).messages == []
    [message] = drain(queue, 1)
    assert time.monotonic() - sent_at >= DELAY_SECONDS - CLOCK_SLACK
    assert message.attempts == 1


@pytest.mark.parametrize("delay", [-1, MAX_DELAY_SECONDS + 1, float("nan")])
def test_delays_out_of_range_are_refused(queue: BaseQueue, delay: float) -> None:
    with pytest.raises(ValueError, match="delay_seconds"):
        queue.send({"n": 1}, delay_seconds=delay)
    assert_empty(queue)


def test_batch_limits(queue: BaseQueue) -> None:
    limit = queue.max_batch_size
    for bad in (0, limit + 1):
        with pytest.raises(ValueError, match="max_messages"):
            queue.receive(max_messages=bad)
    with pytest.raises(ValueError, match="batch limit"):
        queue.send_many([{"n": n} for n in range(limit + 1)])
    with pytest.raises(TypeError, match="send_many needs a sequence of bodies"):
        queue.send_many("ab")
    queue.send_many([{"n": n} for n in range(limit)])
    queue.send_many([])
    received = drain(queue, limit)
    assert sorted(message.body["n"] for message in received) == list(range(limit))
    for message in received:
        message.ack()
    queue.settle(received)
    assert_empty(queue)  # and nothing of the refused batch was sent


def test_body_size_limit(queue: BaseQueue) -> None:
    padding = queue.max_body_bytes - len(b'{"s":""}')
    largest = {"s": "x" * padding}
    assert len(queue.encode(largest)) == queue.max_body_bytes
    too_big = {"s": "x" * (padding + 1)}
    with pytest.raises(ValueError, match="limit"):
        queue.send(too_big)
    with pytest.raises(ValueError, match="limit"):
        queue.send_many([{"n": 1}, too_big])  # checked before anything is sent
    queue.send(largest)
    [message] = drain(queue, 1)
    assert message.body == largest
    message.ack()
    queue.settle([message])
    assert_empty(queue)


def test_unserialisable_body_is_refused(queue: BaseQueue) -> None:
    with pytest.raises(TypeError, match="JSON"):
        queue.send({"when": object()})
    assert_empty(queue)


@pytest.mark.parametrize("envelope", TS_ENVELOPES, ids=["ascii", "unicode"])
@pytest.mark.parametrize(
    ("producer", "consumer"),
    [_param(a, b) for a in KINDS for b in KINDS if a != b],
)
def test_envelope_crosses_backends_unchanged(
    make_queue: Callable[[str], BaseQueue], producer: str, consumer: str, envelope: str
) -> None:
    first, second = make_queue(producer), make_queue(consumer)
    first.send(json.loads(envelope))
    [relayed] = drain(first, 1)
    second.send(relayed.body)
    [message] = drain(second, 1)
    assert json.dumps(message.body, separators=(",", ":"), ensure_ascii=False) == envelope
    assert list(message.body) == ["key", "claim", "windowSeconds", "task"]
    assert type(message.body["windowSeconds"]) is type(json.loads(envelope)["windowSeconds"])


# The PostgreSQL and in-memory queues have no credentials or remote queue.
@pytest.mark.parametrize("kind", ["cloudflare", "sqs"])
def test_wrong_credentials_or_queue_raise_a_clear_queue_error(
    kind: str, cloudflare_options: Callable[..., dict[str, Any]], moto_sqs: MotoSQS
) -> None:
    broken: list[tuple[BaseQueue, str]]
    if kind == "cloudflare":
        secret = "wrong-token-0123456789"
        broken = [
            (CloudflareQueue("cf", options=cloudflare_options(api_token=secret)), "10000"),
            (CloudflareQueue("cf", options=cloudflare_options(queue_id="f" * 32)), "10104"),
        ]
    else:
        secret = "wrong-secret-0123456789"
        url = moto_sqs.create_queue()
        broken = [
            (
                SQSQueue("sqs", options=moto_sqs.options(url, aws_secret_access_key=secret)),
                "SignatureDoesNotMatch",
            ),
            (
                SQSQueue("sqs", options=moto_sqs.options(url, aws_access_key_id="AKIAUNKNOWN0000")),
                "InvalidClientTokenId",
            ),
            (SQSQueue("sqs", options=moto_sqs.options(f"{url}-gone")), "NonExistentQueue"),
        ]
    for queue, code in broken:
        with pytest.raises(QueueError, match=code) as sending:
            queue.send({"n": 1})
        with pytest.raises(QueueError, match=code) as receiving:
            queue.receive(max_messages=1)
        for error in (sending.value, receiving.value):
            assert secret not in str(error)
            assert repr(queue.alias) in str(error)


def test_an_extended_lease_keeps_the_message_past_its_visibility_timeout(
    queue: BaseQueue,
) -> None:
    if not queue.supports_lease_extension:  # Cloudflare's pull API cannot
        with pytest.raises(NotImplementedError, match="cannot extend leases"):
            queue.extend_leases([], seconds=1)
        return
    assert queue.lease_seconds() == LEASE_SECONDS
    queue.send_many([{"n": 1}, {"n": 2}])
    received = drain(queue, 2)
    assert queue.extend_leases(received, seconds=LEASE_SECONDS * 3) == received
    # Past the lease the receive granted, with room to spare: nothing is back.
    waited = time.monotonic()
    assert queue.receive(max_messages=2, wait_seconds=LEASE_SECONDS + 1).messages == []
    assert time.monotonic() - waited >= LEASE_SECONDS
    for message in received:
        message.ack()
    queue.settle(received)
    assert_empty(queue)


def test_a_lease_taken_by_another_delivery_is_not_extended(queue: BaseQueue) -> None:
    # SQS itself may accept an earlier receipt handle on a standard queue
    # (moto always does): there the worker's LeaseKeeper does not extend a
    # lease it knows has run out (tests/worker/test_leases.py).
    if not queue.supports_lease_extension or isinstance(queue, SQSQueue):
        return
    queue.send({"n": 1})
    [first] = drain(queue, 1)
    [second] = drain(queue, 1)  # the first lease ran out; a new delivery took it
    assert second.attempts == 2
    assert queue.extend_leases([first], seconds=LEASE_SECONDS * 3) == []
    second.ack()
    queue.settle([second])
    assert_empty(queue)


@pytest.mark.parametrize("seconds", [0, -1, MAX_DELAY_SECONDS + 1, float("nan"), True, "5"])
def test_bad_lease_lengths_are_refused(queue: BaseQueue, seconds: object) -> None:
    if not queue.supports_lease_extension:
        return
    queue.send({"n": 1})
    [message] = drain(queue, 1)
    error = TypeError if isinstance(seconds, bool | str) else ValueError
    with pytest.raises(error, match="seconds"):
        queue.extend_leases([message], seconds=seconds)  # type: ignore[arg-type]
