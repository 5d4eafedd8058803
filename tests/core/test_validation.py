"""The checks made before anything is written: a queue's configuration and
encoding, which enqueue_claimed and enqueue_claimed_many
apply before claiming, whether the key is free, expired or held."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.claims.bulk import claim_tasks, enqueue_claimed_many
from astral_taskclaim.claims.claim import claim_task, enqueue_claimed
from astral_taskclaim.core.envelope import message_body
from astral_taskclaim.core.validation import (
    check_configured,
    check_encodes,
    max_retries_problem,
    validate_max_retries,
    validate_window,
)
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.tasks import ClaimedTask
from tests.claimkit import RecordingQueue, claims, insert_claim


class CheckOnly:
    """A duck-typed queue with ``check()`` but no ``configuration_errors()``."""

    name = "duck"

    def __init__(self, *messages: checks.CheckMessage) -> None:
        self.messages = list(messages)
        self.calls = 0

    def check(self) -> list[checks.CheckMessage]:
        self.calls += 1
        return self.messages


def test_check_configured_raises_the_serious_messages_naming_the_queue() -> None:
    queue = CheckOnly(
        checks.Warning("just a warning", id="x.W001"),
        checks.Error("bad option a", id="x.E001"),
        checks.Critical("bad option b", id="x.E002"),
    )
    with pytest.raises(
        ImproperlyConfigured, match=r"^queue 'duck' is misconfigured: bad option a; bad option b$"
    ):
        check_configured(queue)


def test_check_configured_passes_warnings_and_queues_without_checks() -> None:
    check_configured(CheckOnly(checks.Warning("just a warning", id="x.W001")))
    check_configured(RecordingQueue())
    check_configured(object())


def test_check_encodes_uses_the_queues_encode_when_it_has_one() -> None:
    check_encodes(RecordingQueue(), [object()])  # no encode: nothing to check
    queue = MemoryQueue("small")
    queue.max_body_bytes = 10  # type: ignore[misc]
    check_encodes(queue, [[1, 2]])
    with pytest.raises(ValueError, match="queue 'small': body is 11 bytes, over the 10-byte"):
        check_encodes(queue, [[1, 2], "x" * 9])


# Through the enqueue calls, on a queue outside the database (claims first).

Enqueue = Callable[[Any, str, Any], object]
ENQUEUES: dict[str, Enqueue] = {
    "single": lambda queue, key, task: enqueue_claimed(queue, key, task, window_seconds=60),
    "many": lambda queue, key, task: enqueue_claimed_many(queue, [(key, task)], window_seconds=60),
}


@pytest.fixture
def memory_queue() -> Iterator[MemoryQueue]:
    queue = MemoryQueue("checked", options={"queue_name": f"checked-{uuid.uuid4()}"})
    yield queue
    queue.purge()


@pytest.fixture
def keys(empty_claims: None) -> dict[str, str]:
    """Tokens of a held claim and of an expired one, as stored."""
    claim_task("held", window_seconds=600)
    insert_claim("expired", seconds=-1)
    return tokens()


def tokens() -> dict[str, str]:
    return {key: token for key, (token, _) in claims().items()}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("call", ENQUEUES, ids=list(ENQUEUES))
@pytest.mark.parametrize("key", ["held", "expired", "free"])
def test_a_body_the_queue_rejects_raises_before_any_claim(
    memory_queue: MemoryQueue, keys: dict[str, str], call: str, key: str
) -> None:
    memory_queue.max_body_bytes = 100  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"'checked': body is 2\d\d bytes, over the 100-byte"):
        ENQUEUES[call](memory_queue, key, "x" * 200)
    assert tokens() == keys  # the expired claim was not replaced
    assert memory_queue.count() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("call", ENQUEUES, ids=list(ENQUEUES))
def test_a_body_at_the_limit_goes_and_one_byte_more_does_not(
    memory_queue: MemoryQueue, keys: dict[str, str], call: str
) -> None:
    task = {"n": "é" * 20}
    size = len(memory_queue.encode(message_body("k:ü", str(uuid.uuid4()), 60, task)))
    memory_queue.max_body_bytes = size  # type: ignore[misc]
    ENQUEUES[call](memory_queue, "k:ü", task)
    with pytest.raises(ValueError, match=f"body is {size + 1} bytes, over the {size}-byte limit"):
        ENQUEUES[call](memory_queue, "k:ö", {"n": "é" * 20 + "x"})
    assert set(tokens()) == {*keys, "k:ü"}
    assert memory_queue.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("call", ENQUEUES, ids=list(ENQUEUES))
@pytest.mark.parametrize("key", ["held", "expired", "free"])
def test_a_misconfigured_queue_raises_before_any_claim(
    keys: dict[str, str], call: str, key: str
) -> None:
    queue = MemoryQueue("misconfigured", options={"visibility_timeout": 0})
    with pytest.raises(
        ImproperlyConfigured,
        match=r"queue 'misconfigured' is misconfigured: .*'misconfigured'.*visibility_timeout",
    ):
        ENQUEUES[call](queue, key, {"id": 1})
    assert tokens() == keys


@pytest.mark.django_db(transaction=True)
def test_a_duck_typed_queue_with_only_check_is_checked_too(keys: dict[str, str]) -> None:
    class Duck(CheckOnly):
        def send(self, body: Any) -> None:
            raise AssertionError("never sent")

        def send_many(self, bodies: Any) -> None:
            raise AssertionError("never sent")

    queue = Duck(checks.Error("no such region", id="duck.E001"))
    for call in ENQUEUES.values():
        with pytest.raises(ImproperlyConfigured, match="queue 'duck' is misconfigured: no such"):
            call(queue, "expired", 1)
    assert tokens() == keys


ZERO_WINDOW = {
    "claim_task": lambda: claim_task("k", window_seconds=0),
    "enqueue_claimed": lambda: enqueue_claimed(MemoryQueue("zero"), "k", 1, window_seconds=0),
    "claim_tasks": lambda: claim_tasks(["k"], window_seconds=0.0),
    "enqueue_claimed_many": lambda: enqueue_claimed_many(
        MemoryQueue("zero"), [("k", 1)], window_seconds=0
    ),
    "claimed_task": lambda: ClaimedTask(
        print,
        queue="zero",
        max_retries=0,
        parse=None,
        retry_after_ms=None,
        name="zero",
        window_seconds=0,
    ),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
@pytest.mark.parametrize("call", ZERO_WINDOW.values(), ids=list(ZERO_WINDOW))
def test_a_zero_window_is_refused_before_anything_is_written(call: Callable[[], object]) -> None:
    zero = r"window_seconds must be more than 0, got 0(\.0)?: a 0-second claim"
    with pytest.raises(ValueError, match=zero):
        call()
    assert claims() == {}


def test_a_window_just_above_zero_is_accepted() -> None:
    assert validate_window(0.001) == 0.001
    with pytest.raises(ValueError, match="window must be more than 0"):
        validate_window(0, name="window")


@pytest.mark.parametrize("value", [-1, 1.0, True, "3", None])
def test_a_retry_count_is_an_int_from_zero(value: object) -> None:
    assert max_retries_problem(value, name="OPTIONS['max_retries']") == (
        f"OPTIONS['max_retries'] must be an int from 0, got {value!r}"
    )
    with pytest.raises(ValueError, match="max_retries must be an int from 0"):
        validate_max_retries(value)


def test_retry_counts_from_zero_pass() -> None:
    assert [validate_max_retries(n) for n in (0, 3)] == [0, 3]
    assert max_retries_problem(0) is None
